"""``selfheal doctor``, ``install`` and ``serve``: the local model's commands."""

from __future__ import annotations

import argparse
import sys

from selfheal.cli.session import EXIT_ERROR


def cmd_doctor(args: argparse.Namespace) -> int:
    from selfheal.doctor import doctor, format_report

    report = doctor(load_model=not args.no_load)
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print(format_report(report))
    return 0


def cmd_install(args: argparse.Namespace) -> int:
    """The local model for a pip user: the steps ``make install`` runs after the package."""
    from selfheal.local.install import run_install

    return run_install(dry_run=args.dry_run, out=sys.stdout if args.dry_run else sys.stderr)


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the local model's llama-server in the foreground, for other processes to share."""
    import signal

    from selfheal.local.server import LocalServer
    from selfheal.local.settings import server_settings

    settings = server_settings(
        args.model or None, slots=args.slots, ctx_per_slot=args.ctx, threads=args.threads
    )
    server = LocalServer(settings, api_key=args.api_key or None, port=args.port, max_restarts=0)
    print(
        f"selfheal: starting llama-server for {settings.alias} ({settings.slots} slots x "
        f"{settings.ctx_per_slot} tokens, {settings.threads} threads); log: {server.log_path}",
        file=sys.stderr,
        flush=True,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop the server on `kill` too
    try:
        server.start()
        url = server.base_url
        print(f"OPENAI_BASE_URL={url}", flush=True)
        print(f"OPENAI_API_KEY={server.api_key}", flush=True)
        print(f"SELFHEAL_LOCAL_URL={url}", flush=True)
        print(f"SELFHEAL_LOCAL_KEY={server.api_key}", flush=True)
        print(
            "selfheal: serving. Set SELFHEAL_LOCAL_URL and SELFHEAL_LOCAL_KEY in a notebook or "
            "shell so that `local` uses this server (or use openai:"
            f"{settings.alias} with the OPENAI_ variables). Ctrl-C stops it.",
            file=sys.stderr,
            flush=True,
        )
        code = server.wait()
        print(f"selfheal: error: {server.describe_exit()}", file=sys.stderr)
        return EXIT_ERROR if code else 0
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()
