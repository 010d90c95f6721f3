"""``kbv serve``: verification and reward as an HTTP service (:mod:`kbv.serve`, docs/serve.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kbv.cli.common import Device, err_console, fail, resolve_device


def serve_cmd(
    problems: Path = typer.Argument(..., help="KernelBench problems to register (a checkout, a levelN folder or a "
                                    "file), addressed as level<L>/<file stem>, e.g. level1/19_ReLU."),
    host: str = typer.Option("127.0.0.1", help="Address to bind; another than loopback needs a token."),
    port: int = typer.Option(8000, min=0, max=65535, help="Port to bind (0: any free port, printed at start)."),
    device: Device = typer.Option(Device.auto, help="Where verifications run: cpu, cuda, or auto."),
    gpus: Optional[str] = typer.Option(None, metavar="LIST", help="One lane per GPU: 'all' or indices like 0,1."),
    lanes: int = typer.Option(1, min=1, metavar="N", help="CPU lanes (--device cpu)."),
    store: Path = typer.Option(Path("kbv-serve.sqlite"), help="SQLite file of the queue and every verdict."),
    token_env: Optional[str] = typer.Option(None, metavar="NAME", help="Bearer tokens from this environment "
                                            "variable (comma or space separated)."),
    token_file: Optional[Path] = typer.Option(None, metavar="FILE", help="Bearer tokens from this file, one a line."),
    queue_size: int = typer.Option(10000, min=1, metavar="N", help="Unfinished jobs at most (429 beyond)."),
    per_client: Optional[int] = typer.Option(None, min=1, metavar="N", help="Unfinished jobs at most per token "
                                             "(default: --queue-size)."),
    max_source_kb: int = typer.Option(256, min=1, max=1024, metavar="KB", help="Largest candidate or problem "
                                      "source accepted."),
    input_blind: bool = typer.Option(False, "--input-blind", help="Reward feedback masks the numbers of "
                                     "nominal faults (shapes are test configuration)."),
    executor: str = typer.Option("local", "--executor", metavar="local|ray", help="local (lanes in this process) or "
                                 "ray (each verification a Ray task; needs the ray extra: pip install kbv\\[ray])."),
    address: Optional[str] = typer.Option(None, "--address", help="--executor ray: the cluster's address "
                                          "(default: start a local Ray cluster)."),
    ray_tasks: Optional[int] = typer.Option(None, "--ray-tasks", min=1, metavar="N", help="--executor ray: "
                                            "verifications on the cluster at once (default: its GPUs on cuda, CPUs on cpu)."),
    allow_uploads: bool = typer.Option(False, "--allow-uploads", help="Accept POST /v1/problems. An uploaded "
                                       "problem's code runs in kbv's trusted reference worker: trusted clients only."),
) -> None:
    """Serve verifications over HTTP for RL loops: POST /v1/verifications, GET /v1/verifications/{id},
    a SQLite queue that survives a restart, Bearer tokens, /metrics. See docs/serve.md."""
    try:
        import uvicorn

        from kbv.serve.app import create_app
    except ImportError as exc:
        fail(f"kbv serve needs its extra ({exc.name} is missing): pip install -e '.[serve]' in kbv's clone, "
             "or pip install 'kbv[serve]'")
    from kbv.batch.executors.lanes import cpu_lanes, gpu_lanes, parse_gpus
    from kbv.intake.layout import LayoutError
    from kbv.intake.problems import ProblemError
    from kbv.serve.queue import JobQueue
    from kbv.serve.security import Limits, TokenError, is_loopback, tokens_from_env, tokens_from_file
    from kbv.serve.service import Registry, Service

    if token_env is not None and token_file is not None:
        fail("give --token-env or --token-file, not both")
    tokens: frozenset[str] = frozenset()
    try:
        if token_env is not None:
            tokens = tokens_from_env(token_env)
        elif token_file is not None:
            tokens = tokens_from_file(token_file)
    except TokenError as exc:
        fail(str(exc))
    if not tokens and not is_loopback(host):
        fail(f"--host {host} is not a loopback address: anyone who reaches it could queue jobs; give "
             "--token-env NAME or --token-file FILE")
    if executor not in ("local", "ray"):
        fail(f"--executor {executor}: give local or ray")
    if executor == "ray" and (gpus is not None or lanes > 1):
        fail("--executor ray places tasks itself: no --gpus or --lanes")
    if executor != "ray" and (address is not None or ray_tasks is not None):
        fail("--address and --ray-tasks are for --executor ray")
    if gpus is not None:
        if device is Device.cpu:
            fail("--gpus runs cuda lanes; it cannot go with --device cpu")
        resolve_device(Device.cuda, f"--gpus {gpus}")
        try:
            specs, dev = gpu_lanes(parse_gpus(gpus)), "cuda"
        except ValueError as exc:
            fail(str(exc))
    else:
        dev = resolve_device(device)
        specs = cpu_lanes(lanes) if dev == "cpu" else gpu_lanes(parse_gpus("0"))
    registry = Registry()
    try:
        n, broken = registry.add_folder(problems)
    except ProblemError as exc:
        fail(f"problem {exc}")
    except LayoutError as exc:
        fail(str(exc))
    for exc in broken:  # as kbv run: one bad file does not keep the others from being served
        err_console.print(f"kbv: skipping broken problem file: {exc}", highlight=False, markup=False, soft_wrap=True)
    if not n:
        fail(f"{problems}: no problem file to serve")
    import sqlite3

    try:
        queue = JobQueue(store, capacity=queue_size, per_client=per_client)
    except (sqlite3.Error, OSError) as exc:
        fail(f"--store {store}: cannot open it as a SQLite store ({exc})")
    n_ray = _ray_tasks(address, ray_tasks, dev) if executor == "ray" else 0
    service = Service(queue, registry, specs, dev, input_blind=input_blind, allow_uploads=allow_uploads,
                      ray_tasks=n_ray)
    app = create_app(service, tokens, Limits(max_source_bytes=max_source_kb << 10,
                                             max_body_bytes=max(2 << 20, (max_source_kb << 10) * 2)))
    sock = _bind(host, port)
    bound = sock.getsockname()
    where = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    lanes_said = f"{n_ray} ray task(s) at once" if n_ray else f"{len(specs)} {dev} lane(s)"
    err_console.print(f"kbv serve: {n} problems, {lanes_said}, store {store}, "
                      f"{'token required' if tokens else 'no token (loopback only)'}; "
                      f"listening on http://{where}:{bound[1]}", highlight=False, soft_wrap=True, markup=False)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])


def _ray_tasks(address: str | None, tasks: int | None, device: str) -> int:
    """Start (or join, ``address``) the Ray cluster and return how many verifications run on it at
    once: ``tasks``, else its GPUs on cuda or its CPUs on cpu. Fails (exit 2) without ray or
    without such resources."""
    try:
        import ray
    except ImportError:
        fail("--executor ray needs ray: pip install 'kbv[ray]'")
    try:
        if not ray.is_initialized():
            # a local cluster's workers inherit this process's environment (KBV_CACHE_DIR, PATH)
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        key = "GPU" if device == "cuda" else "CPU"
        slots = int(ray.cluster_resources().get(key, 0))
    except Exception as exc:  # noqa: BLE001 - no cluster at that address, a refused start
        fail(f"--executor ray: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
    if slots < 1:
        fail(f"--executor ray: the Ray cluster has no {key} resources for --device {device}")
    return tasks or slots


def _bind(host: str, port: int):
    """A listening socket on ``host:port`` (port 0: the system picks), made here so that the port
    is known before uvicorn starts."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        fail(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})")
    sock.set_inheritable(True)
    return sock
