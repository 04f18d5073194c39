"""`karpy top`: a live view of the cluster's nodes by NodePool, with what they cost.

The picture is :mod:`karpy.tools.top`'s (a pure function of the cluster model); this
module feeds it from watches (:mod:`karpy.tools.watch`) and redraws when an event
arrives, at most every ``--interval`` seconds, and otherwise only every
:data:`AGE_TICK` seconds so the ages move on. It never writes to the API server and
polls it only for the NodeOverlays the running karpy put in force (once a minute,
:mod:`karpy.tools.overlays_in_force`), whose prices the nodes are shown at.
Keys (when stdin is a terminal): ``s`` next sort key, ``/`` type a filter (Enter
applies, Esc cancels), ``c`` clear the filter, ``q`` quit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import termios
import tty
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from rich.console import Console, RenderableType
from rich.live import Live

AGE_TICK = 10.0
"""Seconds between redraws when nothing changed (the AGE column moves on)."""


def add(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from karpy.cloudprovider.registry import CLOUD_PROVIDER_ENV
    from karpy.options import add_provider_setting_argument
    from karpy.tools.top import SORT_KEYS

    cmd = commands.add_parser(
        "top",
        help="live view of the nodes by NodePool: requests, pods, age, $/h",
        description="Show the cluster's nodes grouped by NodePool with their instance type, "
        "zone, capacity type, CPU and memory requested vs allocatable, pods, age and $/h "
        "(the offering's price in the provider's catalogue, as the NodeOverlays in force "
        "change it), NodeClaims in flight and "
        "pending pods. Read-only: it needs get/list/watch on nodes, pods, nodeclaims and "
        "nodepools (and list on nodeoverlays, when served). Keys: s sort, / filter, "
        "c clear filter, q quit.",
    )
    cmd.add_argument("--kubeconfig", help="kubeconfig path (default: in-cluster or $KUBECONFIG)")
    cmd.add_argument(
        "--cloud-provider",
        help=f"the provider whose catalogue prices the nodes (env {CLOUD_PROVIDER_ENV}; "
        "default: kwok)",
    )
    add_provider_setting_argument(
        cmd, help="a setting passed to the provider (repeatable), as for karpy run"
    )
    cmd.add_argument("--cluster-name", help="env CLUSTER_NAME (some providers need it)")
    cmd.add_argument(
        "--sort",
        default="name",
        choices=SORT_KEYS,
        help="sort the nodes of each pool by this key (default: name)",
    )
    cmd.add_argument(
        "--filter",
        default="",
        metavar="EXPR",
        help="show matching nodes only: key=value terms (nodepool, zone, "
        "capacity-type, instance-type, status) or words, e.g. 'zone=a spot'",
    )
    cmd.add_argument("--once", action="store_true", help="print one frame and exit (for scripts)")
    cmd.add_argument(
        "--interval",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="least time between two redraws (default: 0.5)",
    )
    cmd.add_argument(
        "--width",
        type=int,
        default=None,
        help="columns to draw with --once (default: the terminal's, else 160)",
    )
    cmd.set_defaults(func=_top)


def _top(args: argparse.Namespace) -> int:
    from karpy.cloudprovider import CloudProviderError
    from karpy.runtime import errors, run
    from karpy.tools.top import Filter

    try:
        Filter.parse(args.filter)
    except ValueError as err:
        print(f"karpy top: --filter: {err}", file=sys.stderr)
        return 2
    if args.interval <= 0:
        print("karpy top: --interval must be above 0", file=sys.stderr)
        return 2
    # Informers log retries as warnings; they would scribble over the live view.
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    try:
        return run(_main(args))
    except KeyboardInterrupt:
        return 0
    except (TimeoutError, OSError, ValueError, errors.ClientError, CloudProviderError) as err:
        print(f"karpy top: {err}", file=sys.stderr)
        return 1


@dataclass
class _Keys:
    """What the keyboard has asked for so far."""

    sort: str
    filter_text: str
    prompt: str | None = None
    quit: bool = False
    error: str | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def press(self, key: str) -> None:
        from karpy.tools.top import Filter, next_sort

        if self.prompt is not None:
            if key in ("\r", "\n"):
                try:
                    Filter.parse(self.prompt)
                except ValueError as err:
                    self.error = str(err)
                else:
                    self.filter_text, self.error = self.prompt, None
                self.prompt = None
            elif key == "\x1b":
                self.prompt = None
            elif key in ("\x7f", "\b"):
                self.prompt = self.prompt[:-1]
            elif key.isprintable():
                self.prompt += key
        elif key == "q":
            self.quit = True
        elif key == "s":
            self.sort = next_sort(self.sort)
        elif key == "/":
            self.prompt = ""
        elif key == "c":
            self.filter_text, self.error = "", None
        self.changed.set()


@contextlib.contextmanager
def _cbreak(fd: int) -> Iterator[None]:
    """Keys arrive one by one, unechoed; Ctrl-C still interrupts."""
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def _main(args: argparse.Namespace) -> int:
    from karpy.cloudprovider import CloudProviderError, ProviderContext, UnavailableOfferings
    from karpy.cloudprovider.registry import CLOUD_PROVIDER_ENV, build_provider, close_provider
    from karpy.controllers.inputs.instancetypes import InstanceTypeCache
    from karpy.options import parse_provider_settings
    from karpy.runtime import KubeClient, SystemClock
    from karpy.state import OverlayStore
    from karpy.state.cost import PriceBook, load_price_book
    from karpy.tools.overlays_in_force import InForceOverlays
    from karpy.tools.top import Filter, render, view_of
    from karpy.tools.view import ReadOnlyClient
    from karpy.tools.watch import watched_cluster

    settings = parse_provider_settings(args.provider_setting)
    if args.kubeconfig is not None:
        connection = await KubeClient.from_kubeconfig(args.kubeconfig)
    else:
        connection = await KubeClient.from_environment()
    # Every write (the provider's included) is refused before it is sent.
    client = ReadOnlyClient(connection, owns=True, tool="karpy top")
    try:
        provider = await build_provider(
            args.cloud_provider or os.environ.get(CLOUD_PROVIDER_ENV) or "kwok",
            ProviderContext(
                client=client,
                cluster_name=args.cluster_name or os.environ.get("CLUSTER_NAME", ""),
                settings=settings,
            ),
        )
        clock = SystemClock()
        store = OverlayStore()
        catalogue = InstanceTypeCache(
            provider, UnavailableOfferings(clock=clock), clock, overlays=store
        )
        overlays = InForceOverlays(client, store, clock)
        keys = _Keys(sort=args.sort, filter_text=args.filter)
        try:
            async with watched_cluster(client, changed=keys.changed.set) as cluster:
                books = [PriceBook()]

                async def frame(max_rows: int | None = None) -> RenderableType:
                    problem = keys.error
                    try:
                        await overlays.refresh(cluster, catalogue)
                        books[0] = await load_price_book(cluster.nodepools(), catalogue.get)
                    except CloudProviderError as err:
                        if args.once:
                            raise
                        # Keep drawing with the last prices; say why they may be stale.
                        problem = f"pricing failed, prices may be stale: {err}"
                    view = view_of(
                        cluster, books[0], sort=keys.sort, filter=Filter.parse(keys.filter_text)
                    )
                    return render(
                        view,
                        now=datetime.now(UTC),
                        prompt=keys.prompt,
                        error=problem,
                        max_rows=max_rows,
                    )

                if args.once:
                    width = args.width or (None if sys.stdout.isatty() else 160)
                    Console(width=width).print(await frame())
                    return 0
                await _live(frame, keys, interval=args.interval)
        finally:
            await close_provider(provider)
    finally:
        await client.close()
    return 0


async def _live(
    draw: Callable[[int | None], Awaitable[RenderableType]], keys: _Keys, *, interval: float
) -> None:
    """Redraw on every change (rate-limited to ``interval``) until ``q``; only the rows
    that fit on the screen are laid out."""
    from karpy.tools.top import FOOTER_LINES

    console = Console()

    def rows() -> int:
        return max(console.size.height - FOOTER_LINES, 1)

    loop = asyncio.get_running_loop()
    stdin = sys.stdin.fileno() if sys.stdin.isatty() else None
    with contextlib.ExitStack() as stack:
        if stdin is not None:
            stack.enter_context(_cbreak(stdin))
            loop.add_reader(stdin, lambda: keys.press(os.read(stdin, 1).decode(errors="ignore")))
            stack.callback(loop.remove_reader, stdin)
        live = stack.enter_context(
            Live(
                await draw(rows()),
                console=console,
                screen=True,
                auto_refresh=False,
                redirect_stderr=False,
            )
        )
        while not keys.quit:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(keys.changed.wait(), timeout=AGE_TICK)
            keys.changed.clear()
            if keys.quit:
                break
            live.update(await draw(rows()), refresh=True)
            await asyncio.sleep(interval)
