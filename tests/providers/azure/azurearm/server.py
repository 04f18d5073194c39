"""ArmServer: an HTTPS server shaped like Azure Resource Manager, for exactly the
operations karpy-azure uses, plus the Retail Prices API.

Operations (paths are matched case-insensitively, as ARM does; any api-version):

- ``GET  /subscriptions/{s}/providers/Microsoft.Compute/skus?$filter=location eq '{l}'``
  the recorded Resource SKUs of the location, in pages (``nextLink``);
- ``PUT|GET|DELETE .../resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces/{n}``
  and ``GET`` of the collection;
- ``PUT|GET|DELETE .../resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{n}``
  and ``GET`` of the collection (paged);
- PUT and DELETE are long-running operations as ARM runs them: ``201``/``202`` with an
  ``Azure-AsyncOperation`` header; the operation reports ``InProgress`` for
  ``lro_polls`` polls and at least ``lro_seconds`` seconds (set it longer than a
  reconcile to make every LRO outlast one), then ``Succeeded`` (the resource's
  provisioningState follows) or ``Failed`` with an error; as in ARM, an operation nobody
  polls finishes too — a GET of the VM shows it done once its time has come;
- ``PUT|GET .../virtualMachines/{vm}/extensions/{n}``: an extension of a provisioned VM
  (a long-running operation; protected settings are kept in the request log, never
  returned); deleting the VM deletes its extensions;
- ``PATCH`` of a VM, an extension (long-running) or a NIC (``UpdateTags``, immediate)
  with ``{"tags": ...}``: the resource's tags are replaced, nothing else changes (any
  other property in the body is refused, 400); a missing resource is 404;
- ``GET .../networkSecurityGroups`` of the resource group and ``GET`` of one (added with
  :meth:`add_nsg`);
- ``GET .../loadBalancers`` of the resource group and ``GET`` of one (added with
  :meth:`add_load_balancer`, with their backend pools);
- ``GET .../virtualNetworks/{v}/subnets/{s}`` for subnets added with :meth:`add_subnet`;
- ``GET /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/communityGalleries/
  {g}/images/{i}/versions`` (versions set in ``image_versions``);
- ``GET /api/retail/prices?$filter=...`` the recorded on-demand prices of the location,
  plus a spot meter per size at a fifth of it (the recording has none), a Windows product
  and a Low Priority meter that a client must skip, 100 items a page (``NextPageLink``).

What it checks: a bearer token on ARM calls; request bodies in ARM's wire format (the
camelCase names ARM documents; a snake_case body is rejected as ARM would reject it); a
VM's NIC exists; an ephemeral OS disk fits the VM size's cache, resource or NVMe disk
(else 400 ``NotSupported`` with ARM's message); the backend pools and NSG a NIC refers
to exist (else 400 ``InvalidResourceReference`` naming the missing one, as ARM answers);
a PUT of an existing VM that changes a property ARM cannot change in place (zones,
priority, the OS profile's computer name, admin user or custom data, the image, the OS
disk's ephemeral settings) is refused with 409 ``PropertyChangeNotAllowed`` naming the
property, and the VM is left as it was. What it models:
deleting a VM deletes the NIC and OS disk marked ``deleteOption: Delete``; a NIC attached
to a VM cannot be deleted (``NicInUse``).

Faults (:meth:`fail`): each capacity error code, sync (409) or as a failed LRO, 429 with
Retry-After, 500s — for the next N matching requests. It does not model quotas,
resource locks, ETags, or any operation not listed.
"""

from __future__ import annotations

import json
import re
import ssl
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from azurearm import load, skus
from azurearm.tls import self_signed

_RG = r"/subscriptions/(?P<sub>[^/]+)/resourcegroups/(?P<rg>[^/]+)/providers"
_ROUTES: list[tuple[str, re.Pattern[str]]] = [
    ("skus", re.compile(r"^/subscriptions/(?P<sub>[^/]+)/providers/microsoft\.compute/skus$")),
    (
        "operation",
        re.compile(
            r"^/subscriptions/(?P<sub>[^/]+)/providers/(?P<rp>[^/]+)/locations/(?P<loc>[^/]+)"
            r"/operations/(?P<id>[^/]+)$"
        ),
    ),
    (
        "image-versions",
        re.compile(
            r"^/subscriptions/(?P<sub>[^/]+)/providers/microsoft\.compute/locations/(?P<loc>[^/]+)"
            r"/communitygalleries/(?P<gallery>[^/]+)/images/(?P<image>[^/]+)/versions$"
        ),
    ),
    ("nics", re.compile(_RG + r"/microsoft\.network/networkinterfaces$")),
    ("nic", re.compile(_RG + r"/microsoft\.network/networkinterfaces/(?P<name>[^/]+)$")),
    ("vms", re.compile(_RG + r"/microsoft\.compute/virtualmachines$")),
    ("vm", re.compile(_RG + r"/microsoft\.compute/virtualmachines/(?P<name>[^/]+)$")),
    (
        "extension",
        re.compile(
            _RG + r"/microsoft\.compute/virtualmachines/(?P<vm>[^/]+)/extensions/(?P<name>[^/]+)$"
        ),
    ),
    ("nsgs", re.compile(_RG + r"/microsoft\.network/networksecuritygroups$")),
    ("nsg", re.compile(_RG + r"/microsoft\.network/networksecuritygroups/(?P<name>[^/]+)$")),
    ("lbs", re.compile(_RG + r"/microsoft\.network/loadbalancers$")),
    ("lb", re.compile(_RG + r"/microsoft\.network/loadbalancers/(?P<name>[^/]+)$")),
    (
        "subnet",
        re.compile(
            _RG + r"/microsoft\.network/virtualnetworks/(?P<vnet>[^/]+)/subnets/(?P<subnet>[^/]+)$"
        ),
    ),
    ("prices", re.compile(r"^/api/retail/prices$")),
]
CAPACITY_CODES = (
    "SkuNotAvailable",
    "ZonalAllocationFailed",
    "AllocationFailed",
    "OverconstrainedZonalAllocationRequest",
    "OverconstrainedAllocationRequest",
)
_SNAKE = re.compile(r"[a-z]_[a-z]")


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    query: dict[str, str]
    body: Any


@dataclass
class Fault:
    """Fail the next ``times`` requests that ``match``."""

    match: Callable[[str, str, Any], bool]  # (operation, name, body)
    status: int
    code: str
    message: str
    times: int = 1
    lro: bool = False  # fail the long-running operation instead of the request
    retry_after: int | None = None


@dataclass
class _Operation:
    kind: str  # "vm" | "nic" | "extension" (name: "<vm>/<extension>")
    name: str
    action: str  # "create" | "delete"
    polls_left: int
    error: dict[str, str] | None = None
    #: monotonic time before which the operation reports InProgress
    ready_at: float = 0.0
    #: applied to its resource already (an operation takes effect once)
    done: bool = False


@dataclass
class ArmState:
    """Everything the server holds (tests read and change it)."""

    vms: dict[str, dict[str, Any]] = field(default_factory=dict)
    nics: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: "<vm>/<extension>" -> the extension
    extensions: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: network security groups of the node resource group, by name
    nsgs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: load balancers of the node resource group, by name
    lbs: dict[str, dict[str, Any]] = field(default_factory=dict)
    subnets: set[str] = field(default_factory=set)
    image_versions: dict[str, list[str]] = field(default_factory=dict)


class ArmServer:
    """The server (see the module docstring). Start it with :meth:`start`."""

    def __init__(
        self, directory: Path, *, lro_polls: int = 1, page_size: int = 8,
        lro_seconds: float = 0.0,
    ) -> None:
        self.directory = directory
        self.lro_polls = lro_polls
        self.lro_seconds = lro_seconds
        """Seconds every long-running operation started from now on stays InProgress."""
        self.page_size = page_size
        self.state = ArmState()
        self.requests: list[Recorded] = []
        self.faults: list[Fault] = []
        self._operations: dict[str, _Operation] = {}
        self.hold_vm_creates = False
        """While set, every VM create operation stays InProgress (a slow VM creation: the
        VM exists, its creator has no answer yet)."""
        self._runner: web.AppRunner | None = None
        self.url = ""
        self.cert = self_signed(directory)
        self._price_cache: dict[str, list[dict[str, Any]]] = {}
        self._capabilities: dict[str, dict[str, str]] | None = None

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> str:
        """Listen on a free loopback port; return the base URL."""
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert.cert_file, self.cert.key_file)
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"https://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- test helpers ----------------------------------------------------------------

    def add_subnet(self, subnet_id: str) -> None:
        """Make ``subnet_id`` exist."""
        self.state.subnets.add(subnet_id.lower())

    def add_nsg(self, name: str, *, subscription: str = "x", resource_group: str = "rg") -> None:
        """Make network security group ``name`` exist (AKS's is ``aks-agentpool-<id>-nsg``)."""
        self.state.nsgs[name] = {
            "id": f"/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/"
                  f"Microsoft.Network/networkSecurityGroups/{name}",
            "name": name,
            "type": "Microsoft.Network/networkSecurityGroups",
            "location": self._location(),
            "properties": {"provisioningState": "Succeeded"},
        }

    def add_load_balancer(
        self,
        name: str,
        pools: dict[str, list[str]],
        *,
        subscription: str = "x",
        resource_group: str = "rg",
    ) -> dict[str, Any]:
        """Make load balancer ``name`` exist with backend pools ``{pool: [ip address ...]}``
        (an empty list: a NIC-based pool, as AKS's are; addresses: an IP-based pool).
        AKS's are ``kubernetes`` (``kubernetes`` and ``aksOutboundBackendPool``) and
        ``kubernetes-internal``."""
        lb_id = (
            f"/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/"
            f"Microsoft.Network/loadBalancers/{name}"
        )
        lb = {
            "id": lb_id,
            "name": name,
            "type": "Microsoft.Network/loadBalancers",
            "location": self._location(),
            "sku": {"name": "Standard"},
            "properties": {
                "provisioningState": "Succeeded",
                "backendAddressPools": [
                    {
                        "id": f"{lb_id}/backendAddressPools/{pool}",
                        "name": pool,
                        "properties": {
                            "provisioningState": "Succeeded",
                            "loadBalancerBackendAddresses": [
                                {"name": f"address{i}", "properties": {"ipAddress": ip}}
                                for i, ip in enumerate(addresses)
                            ],
                        },
                    }
                    for pool, addresses in pools.items()
                ],
            },
        }
        self.state.lbs[name] = lb
        return lb

    def backend_pool_ids(self) -> set[str]:
        """The (lower-cased) IDs of every backend pool of every load balancer."""
        return {
            str(pool["id"]).lower()
            for lb in self.state.lbs.values()
            for pool in lb["properties"]["backendAddressPools"]
        }

    def extensions_of(self, vm: str) -> dict[str, dict[str, Any]]:
        """The extensions of VM ``vm`` by name, in creation order."""
        return {
            key.split("/", 1)[1]: ext for key, ext in self.state.extensions.items()
            if key.split("/", 1)[0] == vm
        }

    def fail(
        self,
        operation: str,
        code: str,
        *,
        status: int = 409,
        message: str = "",
        times: int = 1,
        lro: bool = False,
        retry_after: int | None = None,
        when: Callable[[str, Any], bool] | None = None,
    ) -> Fault:
        """Fail the next ``times`` requests of ``operation`` (``"vm.create"``,
        ``"vm.get"``, ``"vm.delete"``, ``"vm.list"``, ``"nic.create"``, ``"nic.delete"``,
        ``"extension.create"`` (name: the extension's), ``"nsg.list"``, ``"lb.list"``,
        ``"skus"``, ``"prices"`` ...) whose (name, body) pass ``when``."""
        fault = Fault(
            match=lambda op, name, body: op == operation and (when is None or when(name, body)),
            status=status,
            code=code,
            message=message or f"injected {code}",
            times=times,
            lro=lro,
            retry_after=retry_after,
        )
        self.faults.append(fault)
        return fault

    def ready_at(self, kind: str, name: str, action: str = "create") -> float:
        """When the latest ``action`` operation on ``kind`` ``name`` stops reporting
        InProgress (monotonic time, the clock asyncio's loop reads)."""
        times = [op.ready_at for op in self._operations.values()
                 if (op.kind, op.name, op.action) == (kind, name, action)]
        if not times:
            raise KeyError(f"no {action} operation on {kind} {name}")
        return times[-1]

    def bodies(self, method: str, fragment: str) -> list[Any]:
        """Bodies of recorded ``method`` requests whose path contains ``fragment``."""
        return [
            r.body for r in self.requests
            if r.method == method and fragment.lower() in r.path.lower()
        ]

    # -- dispatch --------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/")
        lowered = path.lower()
        query = {k: v for k, v in request.query.items()}
        body: Any = None
        if request.can_read_body:
            text = await request.text()
            body = json.loads(text) if text else None
        self.requests.append(Recorded(request.method, path, query, body))
        for name, pattern in _ROUTES:
            m = pattern.match(lowered)
            if m is None:
                continue
            if name != "prices" and not request.headers.get("Authorization", "").startswith(
                "Bearer "
            ):
                return _error(401, "AuthenticationFailed", "no bearer token")
            # group values in their original case
            groups = {k: path[m.start(k):m.end(k)] for k in m.groupdict()}
            handler = getattr(self, "_" + name.replace("-", "_"))
            result: web.StreamResponse = await handler(request, groups, body)
            return result
        return _error(404, "InvalidResourceType", f"no route for {request.method} {path}")

    def _fault(self, operation: str, name: str, body: Any) -> Fault | None:
        for fault in self.faults:
            if fault.times > 0 and fault.match(operation, name, body):
                fault.times -= 1
                return fault
        return None

    def _fault_response(self, fault: Fault) -> web.Response:
        headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
        return _error(fault.status, fault.code, fault.message, headers=headers)

    def _base(self, request: web.Request) -> str:
        return f"{request.scheme}://{request.host}"

    def _start_operation(
        self, request: web.Request, sub: str, kind: str, name: str, action: str,
        error: dict[str, str] | None = None,
    ) -> dict[str, str]:
        op_id = uuid.uuid4().hex
        self._operations[op_id] = _Operation(
            kind, name, action, self.lro_polls, error,
            ready_at=time.monotonic() + self.lro_seconds,
        )
        rp = "Microsoft.Network" if kind == "nic" else "Microsoft.Compute"
        url = (
            f"{self._base(request)}/subscriptions/{sub}/providers/{rp}/locations/"
            f"{self._location()}/operations/{op_id}?api-version=2024-01-01"
        )
        return {"Azure-AsyncOperation": url}

    def _location(self) -> str:
        return "southcentralus"

    def _sku_capabilities(self) -> dict[str, dict[str, str]]:
        """The recorded SKUs' capabilities by lower-cased name."""
        if self._capabilities is None:
            try:
                items = skus(self._location())
            except FileNotFoundError:
                items = []
            self._capabilities = {
                str(item["name"]).lower(): {
                    c["name"]: str(c.get("value", "")) for c in item.get("capabilities") or ()
                }
                for item in items if item.get("resourceType") == "virtualMachines"
            }
        return self._capabilities

    # -- resource SKUs ---------------------------------------------------------------

    async def _skus(self, request: web.Request, g: dict[str, str], body: Any) -> web.Response:
        fault = self._fault("skus", "", None)
        if fault is not None:
            return self._fault_response(fault)
        m = re.search(r"location eq '([^']+)'", request.query.get("$filter", ""))
        location = m.group(1) if m else "southcentralus"
        try:
            items = skus(location)
        except FileNotFoundError:
            items = []
        return self._page(request, items)

    def _page(self, request: web.Request, items: list[Any]) -> web.Response:
        start = int(request.query.get("$skiptoken", "0") or 0)
        chunk = items[start:start + self.page_size]
        out: dict[str, Any] = {"value": chunk}
        if start + self.page_size < len(items):
            query = dict(request.query)
            query["$skiptoken"] = str(start + self.page_size)
            out["nextLink"] = f"{self._base(request)}{request.path}?{urlencode(query)}"
        return web.json_response(out)

    # -- long-running operations -----------------------------------------------------

    async def _operation(self, request: web.Request, g: dict[str, str], body: Any) -> web.Response:
        op = self._operations.get(g["id"])
        if op is None:
            return _error(404, "NotFound", f"operation {g['id']}")
        if op.polls_left > 0 or self._running(op):
            op.polls_left = max(op.polls_left - 1, 0)
            return web.json_response({"name": g["id"], "status": "InProgress"})
        self._finish(op)
        if op.error is not None:
            return web.json_response({"name": g["id"], "status": "Failed", "error": op.error})
        return web.json_response({"name": g["id"], "status": "Succeeded"})

    def _running(self, op: _Operation) -> bool:
        held = op.kind == "vm" and op.action == "create" and self.hold_vm_creates
        return held or time.monotonic() < op.ready_at

    def _finish(self, op: _Operation) -> None:
        """Apply what ``op`` did to its resource, once: a later resource of the same name
        (a VM created again after a delete) is not touched by an old operation."""
        if op.done:
            return
        op.done = True
        store = {"vm": self.state.vms, "nic": self.state.nics,
                 "extension": self.state.extensions}[op.kind]
        if op.error is not None:
            resource = store.get(op.name)
            if resource is not None:
                resource["properties"]["provisioningState"] = "Failed"
        elif op.action in ("create", "update"):
            resource = store.get(op.name)
            if resource is not None:
                resource["properties"]["provisioningState"] = "Succeeded"
        else:
            self._remove(op.kind, op.name)

    def _settle(self, kind: str, name: str) -> None:
        """ARM finishes an operation whether or not anyone polls it (its creator may be
        gone): before a GET shows resource ``name``, apply its operations whose time has
        come (``lro_polls`` only counts polls of the operation itself)."""
        for op in self._operations.values():
            if op.kind == kind and op.name == name and not op.done and not self._running(op):
                op.polls_left = 0
                self._finish(op)

    def _remove(self, kind: str, name: str) -> None:
        if kind == "nic":
            self.state.nics.pop(name, None)
            return
        if kind == "extension":
            self.state.extensions.pop(name, None)
            return
        # a VM's extensions go with it
        for key in [k for k in self.state.extensions if k.split("/", 1)[0] == name]:
            del self.state.extensions[key]
        vm = self.state.vms.pop(name, None)
        if vm is None:
            return
        for ref in vm["properties"].get("networkProfile", {}).get("networkInterfaces", []):
            if (ref.get("properties") or {}).get("deleteOption") == "Delete":
                self.state.nics.pop(str(ref["id"]).rsplit("/", 1)[-1], None)
            else:
                nic = self.state.nics.get(str(ref["id"]).rsplit("/", 1)[-1])
                if nic is not None:
                    nic["properties"].pop("virtualMachine", None)

    def _patch_tags(
        self, request: web.Request, g: dict[str, str], kind: str, name: str, body: Any
    ) -> web.Response:
        """A tags-only PATCH of a VM or an extension: a long-running operation."""
        store = self.state.vms if kind == "vm" else self.state.extensions
        resource = store.get(name)
        if resource is None:
            rtype = ("Microsoft.Compute/virtualMachines" if kind == "vm"
                     else "Microsoft.Compute/virtualMachines/extensions")
            return _not_found(rtype, name)
        problem = _check_tags_patch(body)
        if problem:
            return _error(400, "InvalidParameter", problem)
        fault = self._fault(f"{kind}.update", name, body)
        if fault is not None and not fault.lro:
            return self._fault_response(fault)
        resource["tags"] = dict(body["tags"])
        resource["properties"]["provisioningState"] = "Updating"
        error = {"code": fault.code, "message": fault.message} if fault else None
        headers = self._start_operation(request, g["sub"], kind, name, "update", error)
        return web.json_response(resource, status=200, headers=headers)

    # -- network interfaces ----------------------------------------------------------

    def _nic_id(self, g: dict[str, str], name: str) -> str:
        return (
            f"/subscriptions/{g['sub']}/resourceGroups/{g['rg']}/providers/"
            f"Microsoft.Network/networkInterfaces/{name}"
        )

    async def _nics(self, request: web.Request, g: dict[str, str], body: Any) -> web.Response:
        if request.method != "GET":
            return _error(405, "MethodNotAllowed", request.method)
        fault = self._fault("nic.list", "", None)
        if fault is not None:
            return self._fault_response(fault)
        return self._page(request, list(self.state.nics.values()))

    async def _nic(self, request: web.Request, g: dict[str, str], body: Any) -> web.Response:
        name = g["name"]
        if request.method == "GET":
            fault = self._fault("nic.get", name, None)
            if fault is not None:
                return self._fault_response(fault)
            nic = self.state.nics.get(name)
            if nic is None:
                return _not_found("Microsoft.Network/networkInterfaces", name)
            return web.json_response(nic)
        if request.method == "PUT":
            problem = _check_nic(body, self.state.subnets)
            if problem:
                return _error(400, "InvalidRequestFormat", problem)
            missing = _missing_references(
                body, self.backend_pool_ids(),
                {str(n["id"]).lower() for n in self.state.nsgs.values()},
            )
            if missing:
                return _error(
                    400, "InvalidResourceReference",
                    f"Resource {missing} referenced by resource {self._nic_id(g, name)} was "
                    "not found. Please make sure that the referenced resource exists, and "
                    "that both resources are in the same region.",
                )
            fault = self._fault("nic.create", name, body)
            if fault is not None and not fault.lro:
                return self._fault_response(fault)
            existed = name in self.state.nics
            nic = {
                **body,
                "id": self._nic_id(g, name),
                "name": name,
                "type": "Microsoft.Network/networkInterfaces",
            }
            nic["properties"] = {**body["properties"], "provisioningState": "Updating"}
            self.state.nics[name] = nic
            error = {"code": fault.code, "message": fault.message} if fault else None
            headers = self._start_operation(request, g["sub"], "nic", name, "create", error)
            return web.json_response(nic, status=200 if existed else 201, headers=headers)
        if request.method == "PATCH":
            nic = self.state.nics.get(name)
            if nic is None:
                return _not_found("Microsoft.Network/networkInterfaces", name)
            problem = _check_tags_patch(body)
            if problem:
                return _error(400, "InvalidRequestFormat", problem)
            fault = self._fault("nic.update", name, body)
            if fault is not None:
                return self._fault_response(fault)
            nic["tags"] = dict(body["tags"])
            return web.json_response(nic)
        if request.method == "DELETE":
            fault = self._fault("nic.delete", name, None)
            if fault is not None:
                return self._fault_response(fault)
            nic = self.state.nics.get(name)
            if nic is None:
                return web.Response(status=204)
            attached = [
                vm_name for vm_name, vm in self.state.vms.items()
                if any(
                    str(ref.get("id", "")).lower() == nic["id"].lower()
                    for ref in vm["properties"].get("networkProfile", {}).get(
                        "networkInterfaces", []
                    )
                )
            ]
            if attached:
                return _error(
                    400, "NicInUse",
                    f"Network Interface {nic['id']} is used by existing resource "
                    f"virtualMachines/{attached[0]}",
                )
            headers = self._start_operation(request, g["sub"], "nic", name, "delete")
            return web.Response(status=202, headers=headers)
        return _error(405, "MethodNotAllowed", request.method)

    # -- virtual machines ------------------------------------------------------------

    async def _vms(self, request: web.Request, g: dict[str, str], body: Any) -> web.Response:
        if request.method != "GET":
            return _error(405, "MethodNotAllowed", request.method)
        fault = self._fault("vm.list", "", None)
        if fault is not None:
            return self._fault_response(fault)
        return self._page(request, list(self.state.vms.values()))

    async def _vm(self, request: web.Request, g: dict[str, str], body: Any) -> web.Response:
        name = g["name"]
        if request.method == "GET":
            fault = self._fault("vm.get", name, None)
            if fault is not None:
                return self._fault_response(fault)
            self._settle("vm", name)
            vm = self.state.vms.get(name)
            if vm is None:
                return _not_found("Microsoft.Compute/virtualMachines", name)
            return web.json_response(vm)
        if request.method == "PUT":
            problem = _check_vm(body, self.state.nics)
            if problem:
                return _error(400, "InvalidParameter", problem)
            problem = _check_ephemeral_os_disk(body, self._sku_capabilities())
            if problem:
                return _error(400, "NotSupported", problem)
            if name in self.state.vms:
                changed = _immutable_change(self.state.vms[name], body)
                if changed:
                    return _error(409, "PropertyChangeNotAllowed",
                                  f"Changing property '{changed}' is not allowed.",
                                  target=changed)
            fault = self._fault("vm.create", name, body)
            if fault is not None and not fault.lro:
                return self._fault_response(fault)
            existed = name in self.state.vms
            vm = {
                **body,
                "id": (
                    f"/subscriptions/{g['sub']}/resourceGroups/{g['rg']}/providers/"
                    f"Microsoft.Compute/virtualMachines/{name}"
                ),
                "name": name,
                "type": "Microsoft.Compute/virtualMachines",
            }
            vm["properties"] = {
                **body["properties"],
                "provisioningState": "Creating",
                "vmId": str(uuid.uuid4()),
                "timeCreated": _now(),
            }
            self.state.vms[name] = vm
            error = {"code": fault.code, "message": fault.message} if fault else None
            headers = self._start_operation(request, g["sub"], "vm", name, "create", error)
            return web.json_response(vm, status=200 if existed else 201, headers=headers)
        if request.method == "PATCH":
            return self._patch_tags(request, g, "vm", name, body)
        if request.method == "DELETE":
            fault = self._fault("vm.delete", name, None)
            if fault is not None:
                return self._fault_response(fault)
            vm = self.state.vms.get(name)
            if vm is None:
                return web.Response(status=204)
            vm["properties"]["provisioningState"] = "Deleting"
            headers = self._start_operation(request, g["sub"], "vm", name, "delete")
            return web.Response(status=202, headers=headers)
        return _error(405, "MethodNotAllowed", request.method)

    # -- VM extensions, network security groups --------------------------------------

    async def _extension(self, request: web.Request, g: dict[str, str], body: Any) -> web.Response:
        vm_name, name = g["vm"], g["name"]
        key = f"{vm_name}/{name}"
        if request.method == "GET":
            ext = self.state.extensions.get(key)
            if ext is None:
                return _not_found("Microsoft.Compute/virtualMachines/extensions", key)
            return web.json_response(ext)
        if request.method == "PATCH":
            return self._patch_tags(request, g, "extension", key, body)
        if request.method != "PUT":
            return _error(405, "MethodNotAllowed", request.method)
        vm = self.state.vms.get(vm_name)
        if vm is None:
            return _not_found("Microsoft.Compute/virtualMachines", vm_name)
        if vm["properties"].get("provisioningState") != "Succeeded":
            return _error(409, "OperationNotAllowed",
                          f"virtual machine {vm_name} is not provisioned")
        problem = _check_extension(body)
        if problem:
            return _error(400, "InvalidParameter", problem)
        fault = self._fault("extension.create", name, body)
        if fault is not None and not fault.lro:
            return self._fault_response(fault)
        existed = key in self.state.extensions
        ext = {
            **body,
            "id": f"{vm['id']}/extensions/{name}",
            "name": name,
            "type": "Microsoft.Compute/virtualMachines/extensions",
        }
        # ARM never returns protected settings
        props = {k: v for k, v in body["properties"].items() if k != "protectedSettings"}
        ext["properties"] = {**props, "provisioningState": "Creating"}
        self.state.extensions[key] = ext
        error = {"code": fault.code, "message": fault.message} if fault else None
        headers = self._start_operation(request, g["sub"], "extension", key, "create", error)
        return web.json_response(ext, status=200 if existed else 201, headers=headers)

    async def _nsgs(self, request: web.Request, g: dict[str, str], body: Any) -> web.Response:
        if request.method != "GET":
            return _error(405, "MethodNotAllowed", request.method)
        fault = self._fault("nsg.list", "", None)
        if fault is not None:
            return self._fault_response(fault)
        return self._page(request, list(self.state.nsgs.values()))

    async def _nsg(self, request: web.Request, g: dict[str, str], body: Any) -> web.Response:
        if request.method != "GET":
            return _error(405, "MethodNotAllowed", request.method)
        found = {k.lower(): v for k, v in self.state.nsgs.items()}.get(g["name"].lower())
        if found is None:
            return _not_found("Microsoft.Network/networkSecurityGroups", g["name"])
        return web.json_response(found)

    async def _lbs(self, request: web.Request, g: dict[str, str], body: Any) -> web.Response:
        if request.method != "GET":
            return _error(405, "MethodNotAllowed", request.method)
        fault = self._fault("lb.list", "", None)
        if fault is not None:
            return self._fault_response(fault)
        return self._page(request, list(self.state.lbs.values()))

    async def _lb(self, request: web.Request, g: dict[str, str], body: Any) -> web.Response:
        if request.method != "GET":
            return _error(405, "MethodNotAllowed", request.method)
        found = {k.lower(): v for k, v in self.state.lbs.items()}.get(g["name"].lower())
        if found is None:
            return _not_found("Microsoft.Network/loadBalancers", g["name"])
        return web.json_response(found)

    # -- subnets, images -------------------------------------------------------------

    async def _subnet(self, request: web.Request, g: dict[str, str], body: Any) -> web.Response:
        if request.path.rstrip("/").lower() not in self.state.subnets:
            return _not_found("Microsoft.Network/virtualNetworks/subnets", g["subnet"])
        return web.json_response(
            {
                "id": request.path.rstrip("/"),
                "name": g["subnet"],
                "properties": {"addressPrefix": "10.224.0.0/16", "provisioningState": "Succeeded"},
            }
        )

    async def _image_versions(
        self, request: web.Request, g: dict[str, str], body: Any
    ) -> web.Response:
        versions = self.state.image_versions.get(g["image"], [])
        if not versions:
            return _not_found("communityGalleries/images", g["image"])
        base = f"/CommunityGalleries/{g['gallery']}/images/{g['image']}/versions"
        return self._page(
            request,
            [
                {
                    "name": v,
                    "location": g["loc"],
                    "type": "Microsoft.Compute/locations/communityGalleries/images/versions",
                    "identifier": {"uniqueId": f"{base}/{v}"},
                    "properties": {"publishedDate": _now()},
                }
                for v in versions
            ],
        )

    # -- retail prices ---------------------------------------------------------------

    def _price_items(self, location: str) -> list[dict[str, Any]]:
        if location not in self._price_cache:
            regions = load("azure-prices.json")["regions"]
            items: list[dict[str, Any]] = []
            for size, entry in sorted(regions.get(location, {}).items()):
                if not size.startswith("Standard_"):
                    continue
                meter = size.removeprefix("Standard_").replace("_", " ")
                common = {
                    "currencyCode": "USD",
                    "armRegionName": location,
                    "armSkuName": size,
                    "serviceName": "Virtual Machines",
                    "serviceFamily": "Compute",
                    "type": "Consumption",
                    "unitOfMeasure": "1 Hour",
                    "productName": f"Virtual Machines {meter} Series",
                }
                price = float(entry["ondemand"])
                items.append({**common, "retailPrice": price, "skuName": meter,
                              "meterName": meter})
                items.append({**common, "retailPrice": round(price / 5, 6),
                              "skuName": f"{meter} Spot", "meterName": f"{meter} Spot"})
                items.append({**common, "retailPrice": price * 3, "skuName": meter,
                              "meterName": meter,
                              "productName": f"Virtual Machines {meter} Series Windows"})
                items.append({**common, "retailPrice": price / 10,
                              "skuName": f"{meter} Low Priority",
                              "meterName": f"{meter} Low Priority"})
            self._price_cache[location] = items
        return self._price_cache[location]

    async def _prices(self, request: web.Request, g: dict[str, str], body: Any) -> web.Response:
        fault = self._fault("prices", "", None)
        if fault is not None:
            return self._fault_response(fault)
        m = re.search(r"armRegionName eq '([^']+)'", request.query.get("$filter", ""))
        if m is None or "priceType eq 'Consumption'" not in request.query.get("$filter", ""):
            return _error(400, "BadRequest", "expected priceType and armRegionName filters")
        items = self._price_items(m.group(1))
        skip = int(request.query.get("$skip", "0") or 0)
        chunk = items[skip:skip + 100]
        next_link = None
        if skip + 100 < len(items):
            query = dict(request.query)
            query["$skip"] = str(skip + 100)
            next_link = f"{self._base(request)}{request.path}?{urlencode(query)}"
        return web.json_response(
            {"BillingCurrency": "USD", "Items": chunk, "NextPageLink": next_link,
             "Count": len(chunk)}
        )


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _error(
    status: int, code: str, message: str, *, headers: dict[str, str] | None = None,
    target: str = "",
) -> web.Response:
    error = {"code": code, "message": message}
    if target:
        error["target"] = target
    return web.json_response({"error": error}, status=status, headers=headers)


#: VM properties ARM refuses to change on an existing VM (PropertyChangeNotAllowed),
#: as dotted paths into the body; "zones" is top-level.
_IMMUTABLE_VM_PROPERTIES = (
    "zones",
    "properties.priority",
    "properties.osProfile.computerName",
    "properties.osProfile.adminUsername",
    "properties.osProfile.customData",
    "properties.storageProfile.imageReference",
    "properties.storageProfile.osDisk.diffDiskSettings",
)


def _immutable_change(existing: dict[str, Any], body: Any) -> str:
    """The first property ARM cannot change in place that ``body`` changes on
    ``existing`` ("" if none), named as ARM names it (without ``properties.``)."""
    if not isinstance(body, dict):
        return ""
    for path in _IMMUTABLE_VM_PROPERTIES:
        old: Any = existing
        new: Any = body
        for part in path.split("."):
            old = old.get(part) if isinstance(old, dict) else None
            new = new.get(part) if isinstance(new, dict) else None
        if old != new:
            return path.removeprefix("properties.")
    return ""


def _not_found(kind: str, name: str) -> web.Response:
    return _error(404, "ResourceNotFound", f"The Resource '{kind}/{name}' was not found.")


def _snake_keys(value: Any, path: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("tags", "userAssignedIdentities"):
                continue  # user-chosen keys
            if _SNAKE.search(key):
                found.append(f"{path}{key}")
            found.extend(_snake_keys(item, f"{path}{key}."))
    elif isinstance(value, list):
        for item in value:
            found.extend(_snake_keys(item, path))
    return found


def _check_nic(body: Any, subnets: set[str]) -> str:
    if not isinstance(body, dict):
        return "the request body is not a JSON object"
    snake = _snake_keys(body)
    if snake:
        return f"unknown properties (not ARM's wire format): {', '.join(snake)}"
    if not body.get("location"):
        return "location is required"
    configs = (body.get("properties") or {}).get("ipConfigurations") or []
    if not configs:
        return "properties.ipConfigurations is required"
    for config in configs:
        subnet = ((config.get("properties") or {}).get("subnet") or {}).get("id", "")
        if subnets and subnet.lower() not in subnets:
            return f"subnet {subnet!r} does not exist"
    return ""


def _missing_references(body: dict[str, Any], pools: set[str], nsgs: set[str]) -> str:
    """The first backend pool or NSG a NIC refers to that does not exist ("" if none)."""
    props = body.get("properties") or {}
    nsg = str((props.get("networkSecurityGroup") or {}).get("id", "") or "")
    if nsg and nsg.lower() not in nsgs:
        return nsg
    for config in props.get("ipConfigurations") or []:
        for pool in (config.get("properties") or {}).get("loadBalancerBackendAddressPools") or []:
            pool_id = str(pool.get("id", ""))
            if pool_id.lower() not in pools:
                return pool_id
    return ""


def _ephemeral_limit_gib(caps: dict[str, str], placement: str) -> int:
    """How large an ephemeral OS disk ``placement`` holds on a SKU, in GiB (0: none)."""
    def number(key: str) -> int:
        try:
            return int(float(caps.get(key, "0") or 0))
        except ValueError:
            return 0

    if placement == "CacheDisk":
        return number("CachedDiskBytes") // 2**30
    if placement == "ResourceDisk":
        return number("MaxResourceVolumeMB") // 1024
    if placement == "NvmeDisk":
        placements = caps.get("SupportedEphemeralOSDiskPlacements", "").split(",")
        return number("NvmeDiskSizeInMiB") // 1024 if "NvmeDisk" in placements else 0
    return 0


def _check_ephemeral_os_disk(body: dict[str, Any], capabilities: dict[str, dict[str, str]]) -> str:
    """ARM's NotSupported refusals of an ephemeral OS disk the VM size cannot hold."""
    props = body.get("properties") or {}
    os_disk = (props.get("storageProfile") or {}).get("osDisk") or {}
    diff = os_disk.get("diffDiskSettings")
    if not diff:
        return ""
    size = str((props.get("hardwareProfile") or {}).get("vmSize", ""))
    caps = capabilities.get(size.lower(), {})
    if caps.get("EphemeralOSDiskSupported", "").lower() != "true":
        return f"The Virtual Machine size {size} does not support Ephemeral OS disk."
    placement = diff.get("placement") or "CacheDisk"
    limit = _ephemeral_limit_gib(caps, placement)
    if limit <= 0:
        return (
            f"The Diff Disk Placement of type '{placement}' is not supported for VM size "
            f"{size}. Please request with different DiffDiskPlacement or use a different VM "
            "Sku which supports the current DiffDiskPlacement in the request."
        )
    if int(os_disk.get("diskSizeGB") or 0) > limit:
        return (
            f"OS disk of Ephemeral VM with size greater than {limit} GB is not allowed for VM "
            f"size {size} when the DiffDiskPlacement is {placement}. Please refer to "
            "https://aka.ms/Ephemeral for more details."
        )
    if os_disk.get("caching") != "ReadOnly":
        return "Ephemeral OS disks support only ReadOnly caching."
    return ""


def _check_tags_patch(body: Any) -> str:
    """What is wrong with a tags-only PATCH body ("" if nothing)."""
    if not isinstance(body, dict) or not isinstance(body.get("tags"), dict):
        return "the request body must be a JSON object with tags"
    other = sorted(k for k in body if k != "tags")
    if other:
        return f"unexpected properties in a tags update: {', '.join(other)}"
    return ""


def _check_extension(body: Any) -> str:
    if not isinstance(body, dict):
        return "the request body is not a JSON object"
    snake = _snake_keys(body)
    if snake:
        return f"unknown properties (not ARM's wire format): {', '.join(snake)}"
    if not body.get("location"):
        return "location is required"
    props = body.get("properties") or {}
    for key in ("publisher", "type", "typeHandlerVersion"):
        if not props.get(key):
            return f"properties.{key} is required"
    return ""


def _check_vm(body: Any, nics: dict[str, dict[str, Any]]) -> str:
    if not isinstance(body, dict):
        return "the request body is not a JSON object"
    snake = _snake_keys(body)
    if snake:
        return f"unknown properties (not ARM's wire format): {', '.join(snake)}"
    props = body.get("properties") or {}
    if not body.get("location"):
        return "location is required"
    if not (props.get("hardwareProfile") or {}).get("vmSize"):
        return "properties.hardwareProfile.vmSize is required"
    os_disk = (props.get("storageProfile") or {}).get("osDisk") or {}
    if os_disk.get("createOption") != "FromImage":
        return "properties.storageProfile.osDisk.createOption must be FromImage"
    refs = (props.get("networkProfile") or {}).get("networkInterfaces") or []
    if not refs:
        return "properties.networkProfile.networkInterfaces is required"
    for ref in refs:
        if str(ref.get("id", "")).rsplit("/", 1)[-1] not in nics:
            return f"network interface {ref.get('id')!r} not found"
    if props.get("priority") == "Spot" and props.get("evictionPolicy") not in ("Delete",
                                                                                "Deallocate"):
        return "a Spot VM needs an evictionPolicy"
    return ""

