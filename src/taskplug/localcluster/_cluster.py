"""``LocalCluster``: the embedded Kubernetes API, its controllers, and their lifecycle.

In the spirit of kwok: one object store with API-server semantics, ResourceQuota admission, Pod Security
admission at the ``baseline`` level (``pod_security="privileged"`` admits every pod), a scheduler, a
kubelet (real processes, or simulated), operators for custom resources, scripted faults, an in-process
client and an HTTP façade. ``async with LocalCluster(...) as cluster`` runs every controller as a task of
one ``asyncio.TaskGroup`` (owned by a runner task, so entering and leaving may happen in different tasks);
leaving stops them all, kills every process and closes the HTTP server. Nothing is left running.

The scheduler and the kubelet survive any pod (an error in one pod's handling fails that pod alone). Should
one of them stop all the same, the cluster does not hang silently: the error is logged and every API call
answers 500 ``InternalError`` naming the component and its error from then on.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import shutil
import ssl
import tempfile
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from taskplug.core import Clock, SystemClock
from taskplug.k8s import KubeApiError, Operator, ResourceType, WatchEvent
from taskplug.localcluster._client import LocalKubeClient
from taskplug.localcluster._errors import internal_error
from taskplug.localcluster._events import EventRecorder
from taskplug.localcluster._faults import Faults
from taskplug.localcluster._kubeconfig import write_kubeconfig
from taskplug.localcluster._kubelet import ProcessKubelet
from taskplug.localcluster._kubeletbase import KubeletBase
from taskplug.localcluster._nodes import DEFAULT_NODE, NodeConfig, node_object
from taskplug.localcluster._podlog import LogOptions, previous_not_found, select_log
from taskplug.localcluster._podsecurity import PodSecurityAdmission, PodSecurityLevel
from taskplug.localcluster._podstatus import ImagePolicy
from taskplug.localcluster._quota import QuotaController
from taskplug.localcluster._resources import NAMESPACE, NODE, POD, TypeRegistry, deep_copy, format_time
from taskplug.localcluster._scheduler import Scheduler
from taskplug.localcluster._simulated import SimulatedKubelet
from taskplug.localcluster._store import Store
from taskplug.localcluster._timers import Timers
from taskplug.localcluster._zygote import Zygote

if TYPE_CHECKING:
    from taskplug.localcluster._tls import ServingCertificate

__all__ = ["LocalCluster"]

_log = logging.getLogger(__name__)


class LocalCluster:
    """An in-memory Kubernetes API with a scheduler and a kubelet. Use as ``async with``."""

    def __init__(
        self,
        mode: Literal["process", "simulated"] = "process",
        *,
        clock: Clock | None = None,
        nodes: Sequence[NodeConfig] | None = None,
        image_pull_failures: Sequence[str] = (),
        history_limit: int = 20_000,
        event_limit: int = 20_000,
        bookmark_interval: float = 60.0,
        workdir: Path | None = None,
        memory_poll_interval: float = 0.05,
        kill_grace_seconds: float = 2.0,
        pod_security: PodSecurityLevel = "baseline",
        zygote: Zygote | None = None,
    ) -> None:
        if mode not in ("process", "simulated"):
            raise ValueError(f"mode must be 'process' or 'simulated', not {mode!r}")
        # Checked first, so that a bad level starts nothing.
        self.pod_security = PodSecurityAdmission(pod_security)
        self.mode = mode
        self.clock: Clock = clock or SystemClock()
        self.types = TypeRegistry()
        self.store = Store(self.clock, self.types, history_limit=history_limit)
        self.faults = Faults(self.clock)
        self.timers = Timers(self.clock)
        self.quota = QuotaController(self.store)
        self.store.admission.append(self.pod_security.admit)
        self.store.update_admission.append(self.pod_security.admit)
        self.recorder = EventRecorder(self.store, limit=event_limit)
        self.scheduler = Scheduler(self.store, self.recorder)
        self._nodes = list(nodes) if nodes is not None else [DEFAULT_NODE]
        self._bookmark_interval = bookmark_interval
        self._own_workdir = workdir is None
        self._workdir = workdir
        self._images = ImagePolicy(image_pull_failures)
        self._memory_poll_interval = memory_poll_interval
        self._kill_grace = kill_grace_seconds
        self._zygote = zygote
        self.kubelet: KubeletBase | None = None
        self._operators: list[tuple[ResourceType, Operator]] = []
        self._group: asyncio.TaskGroup | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._runner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._http: Any = None  # the aiohttp runner, when serving
        self._http_url: str | None = None
        self._http_token: str | None = None
        self._http_certificate: ServingCertificate | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------
    async def __aenter__(self) -> LocalCluster:
        if self._runner is not None:
            raise RuntimeError("LocalCluster is already running")
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="taskplug-localcluster-"))
        if self.mode == "process":
            self.kubelet = ProcessKubelet(
                self.store,
                self.recorder,
                self._images,
                self.clock,
                workdir=self._workdir,
                poll_interval=self._memory_poll_interval,
                kill_grace=self._kill_grace,
                zygote=self._zygote,
            )
        else:
            self.kubelet = SimulatedKubelet(self.store, self.recorder, self._images, self.clock, self.timers)
        now = format_time(self.clock.now())
        if self.store.try_get(NAMESPACE, None, "default") is None:
            self.store.create(NAMESPACE, {"metadata": {"name": "default"}})
        for cfg in self._nodes:
            if self.store.try_get(NODE, None, cfg.name) is None:
                self.store.create(NODE, node_object(cfg, now=now))
        started = asyncio.Event()
        self._stop = asyncio.Event()
        self._runner = asyncio.create_task(self._run(started), name="taskplug-localcluster")
        starter = asyncio.ensure_future(started.wait())
        await asyncio.wait({starter, self._runner}, return_when=asyncio.FIRST_COMPLETED)
        if self._runner.done():
            starter.cancel()
            await self._runner  # raises what broke the start
        return self

    async def _run(self, started: asyncio.Event) -> None:
        assert self.kubelet is not None
        async with asyncio.TaskGroup() as group:
            self._group = group
            self._tasks = [
                group.create_task(self._supervise("timers", self.timers.run()), name="localcluster-timers"),
                group.create_task(
                    self._supervise("scheduler", self.scheduler.run()), name="localcluster-scheduler"
                ),
                group.create_task(
                    self._supervise("kubelet", self.kubelet.run()), name="localcluster-kubelet"
                ),
            ]
            for rtype, operator in self._operators:
                self._tasks.append(
                    group.create_task(self._operate(rtype, operator), name=f"operator-{rtype.plural}")
                )
            if self._bookmark_interval > 0:
                self._arm_bookmarks()
            started.set()
            try:
                await self._stop.wait()
            finally:
                self._group = None
                for task in self._tasks:
                    task.cancel()

    async def _supervise(self, component: str, run: Coroutine[Any, Any, None]) -> None:
        try:
            await run
        except Exception as err:
            _log.exception("the embedded cluster's %s stopped", component)
            self.faults.component_down(
                internal_error(f"the embedded cluster's {component} stopped: {type(err).__name__}: {err}")
            )

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Stop every controller, kill every process, close the HTTP server. Idempotent."""
        if self._http is not None:
            self.store.drop_watches()
            runner, self._http = self._http, None
            self._http_url = self._http_token = None
            self._http_certificate = None
            await runner.cleanup()
        runner_task, self._runner = self._runner, None
        if runner_task is not None:
            self._stop.set()
            try:
                await runner_task
            finally:
                self.store.drop_watches()
                if self._own_workdir and self._workdir is not None:
                    shutil.rmtree(self._workdir, ignore_errors=True)
                    self._workdir = None

    def _arm_bookmarks(self) -> None:
        def tick() -> None:
            self.store.bookmark()
            if self._group is not None:
                self.timers.call_later(self._bookmark_interval, tick)

        self.timers.call_later(self._bookmark_interval, tick)

    # -- API access --------------------------------------------------------------------------------------
    def client(self) -> LocalKubeClient:
        """An in-process :class:`taskplug.k8s.KubeClient` (subject to :attr:`faults`)."""
        return LocalKubeClient(self.store, self.timers, self.faults, self.logs)

    def compact(self) -> None:
        """Forget the watch history, so resuming from any earlier version answers 410 Expired."""
        self.store.compact()

    def drop_watches(self) -> int:
        """Close every open client watch (in-process and HTTP) cleanly; returns how many were open."""
        return self.store.drop_watches()

    def register_resource(self, rtype: ResourceType) -> None:
        """Serve a custom resource type (discovery, HTTP), as creating its CRD would."""
        self.types.register(rtype)

    def register_operator(self, rtype: ResourceType, operator: Operator) -> None:
        """Run ``operator`` on every change of ``rtype`` objects (existing ones first, as ADDED)."""
        self.types.register(rtype)
        self._operators.append((rtype, operator))
        if self._group is not None:
            self._tasks.append(
                self._group.create_task(self._operate(rtype, operator), name=f"operator-{rtype.plural}")
            )

    async def _operate(self, rtype: ResourceType, operator: Operator) -> None:
        client = LocalKubeClient(self.store, self.timers, None)
        watcher = self.store.watch(rtype, internal=True)
        try:
            while (item := await watcher.next()) is not None:
                type_, event = item
                try:
                    result = operator(WatchEvent(type_, deep_copy(event.obj)), client)  # type: ignore[arg-type]
                    if inspect.isawaitable(result):
                        await result
                except KubeApiError as err:
                    _log.warning("operator for %s: %s", rtype.plural, err)
                except Exception:
                    _log.exception("operator for %s failed on %s", rtype.plural, type_)
        finally:
            watcher.close()

    # -- the kubelet's side ------------------------------------------------------------------------------
    def logs(
        self,
        namespace: str,
        name: str,
        container: str | None = None,
        *,
        tail_lines: int | None = None,
        limit_bytes: int | None = None,
        previous: bool = False,
    ) -> str:
        """A container's output so far (the first container when none is named), as ``pods/log`` answers
        with ``tailLines``, ``limitBytes`` and ``previous`` (``_podlog.py``)."""
        pod = self.store.get(POD, namespace, name)
        if previous:
            names = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
            raise previous_not_found(container or (names[0] if names else ""), name)
        text = self.kubelet.logs(namespace, name, container) if self.kubelet is not None else ""
        return select_log(text, LogOptions(tail_lines=tail_lines, limit_bytes=limit_bytes))

    def shutdown_node(self, name: str) -> None:
        """Kill the node's pods (Failed, reason NodeShutdown, containers exit 137) and cordon the node."""
        self.store.get(NODE, None, name)
        if self.kubelet is not None:
            self.kubelet.shutdown_node(name)

    def restore_node(self, name: str) -> None:
        """Make a shut-down node schedulable and Ready again."""
        if self.kubelet is not None:
            self.kubelet.restore_node(name)

    async def wait_for(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        within: float = 30.0,
    ) -> dict[str, Any]:
        """The first version of the object that satisfies ``predicate`` (a copy); TimeoutError after
        ``within`` real seconds. For tests and tools: it watches, it does not poll."""
        watcher = self.store.watch(rtype, namespace, fields=None, internal=True)
        try:
            async with asyncio.timeout(within):
                while (item := await watcher.next()) is not None:
                    obj = item[1].obj
                    if obj["metadata"]["name"] == name and item[0] != "DELETED" and predicate(obj):
                        copied: dict[str, Any] = deep_copy(obj)
                        return copied
        finally:
            watcher.close()
        raise TimeoutError(f"{rtype.plural} {namespace}/{name}: the cluster stopped while waiting")

    # -- HTTP ----------------------------------------------------------------------------------------
    async def serve_http(self, port: int = 0, *, host: str = "127.0.0.1", token: str | None = None) -> str:
        """Serve the API over HTTPS on loopback; returns the base URL (``https://127.0.0.1:PORT``).

        The serving certificate is signed by a CA made for this start; every request but health and version
        needs ``Authorization: Bearer <token>`` (``token``, or a random one: :attr:`http_token`).
        :meth:`kubeconfig` writes a kubeconfig that carries both."""
        # aiohttp is loaded only by a cluster that is served over HTTP (an in-process run never needs it).
        from taskplug.localcluster._access import new_token
        from taskplug.localcluster._http import start_server
        from taskplug.localcluster._tls import ServingCertificate

        if self._runner is None:
            raise RuntimeError("start the cluster (async with LocalCluster(...)) before serving it")
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the local cluster only listens on loopback")
        if self._http is not None:
            raise RuntimeError("the cluster is already served over HTTP")
        self._http_token = token or new_token()
        self._http_certificate = ServingCertificate.generate()
        self._http, self._http_url = await start_server(
            self, host=host, port=port, token=self._http_token, tls=self._http_certificate.server_context()
        )
        return self._http_url

    @property
    def http_token(self) -> str:
        """The bearer token HTTP clients must send (set by :meth:`serve_http`)."""
        if self._http_token is None:
            raise RuntimeError("the cluster is not served over HTTP (await cluster.serve_http() first)")
        return self._http_token

    def http_client_ssl(self) -> ssl.SSLContext:
        """A TLS context trusting this start's CA only, for raw HTTPS requests to :meth:`serve_http`'s URL."""
        if self._http_certificate is None:
            raise RuntimeError("the cluster is not served over HTTP (await cluster.serve_http() first)")
        return self._http_certificate.client_context()

    def kubeconfig(self, path: str | Path, *, namespace: str = "default") -> Path:
        """Write a kubeconfig (context ``taskplug-local``, mode 0600) for the served URL: its CA and token."""
        if self._http_url is None or self._http_certificate is None:
            raise RuntimeError("the cluster is not served over HTTP (await cluster.serve_http() first)")
        return write_kubeconfig(
            Path(path),
            self._http_url,
            token=self.http_token,
            ca_pem=self._http_certificate.ca_pem,
            namespace=namespace,
        )

    @staticmethod
    def write_kubeconfig(
        path: str | Path, url: str, *, token: str | None = None, namespace: str = "default"
    ) -> Path:
        """Write a kubeconfig (context ``taskplug-local``, mode 0600, no CA) for any ``url``."""
        return write_kubeconfig(Path(path), url, token=token, namespace=namespace)
