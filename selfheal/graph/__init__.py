"""The engine: the table of nodes and routes (``table``), the runner that steps through it
(``runner``), checkpoints, and the nodes that call no model (``gate``, ``execute``,
``select``). Roles (``selfheal.roles``) provide the model-calling nodes."""
