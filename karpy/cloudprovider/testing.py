"""The conformance kit: a pytest suite every CloudProvider should pass.

Subclass :class:`CloudProviderConformance` in a test module and give it a ``provider``
fixture; pytest then runs the whole suite against your provider::

    import pytest
    from karpy.cloudprovider.testing import CloudProviderConformance
    from my_provider import MyCloudProvider

    class TestMyProvider(CloudProviderConformance):
        @pytest.fixture
        def provider(self) -> MyCloudProvider:
            return MyCloudProvider(...)

The suite launches real instances through your provider (against whatever test
environment the fixture points it at) and deletes every one of them at the end.

Optional overrides:

- fixture ``node_class_ref``: the NodeClass the test NodeClaims refer to (default: the
  provider's first supported kind, named ``default``; create that object first if your
  provider reads it);
- fixture ``nodepool``: the NodePool passed to ``get_instance_types``;
- ``requests``: what every test NodeClaim requests (default 100m CPU, 64Mi memory);
- ``timeout``: seconds to wait for eventually consistent outcomes (a terminated
  instance disappearing from ``get``/``list``);
- ``well_known_labels``: label keys every instance type must define (add your own).

It needs pytest-asyncio; the tests run on the event loop pytest-asyncio configures.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import pytest
import pytest_asyncio

from karpy.apis import NodeClaim, NodePool
from karpy.apis.labels import (
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_OS,
    LABEL_ZONE,
)
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider._protocol import CloudProvider
from karpy.cloudprovider.errors import (
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
)
from karpy.scheduling import InstanceType, Offering
from karpy.scheduling import resources as res

__all__ = [
    "CORE_WELL_KNOWN_LABELS",
    "CloudProviderConformance",
    "Launcher",
    "make_nodeclaim",
    "make_nodepool",
]

T = TypeVar("T")

#: The labels every instance type must define (Karpenter's scheduling relies on them).
CORE_WELL_KNOWN_LABELS = frozenset(
    {LABEL_INSTANCE_TYPE, LABEL_ARCH, LABEL_OS, LABEL_ZONE, LABEL_CAPACITY_TYPE}
)
_LAUNCH_LABELS = (LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE, LABEL_ARCH, LABEL_OS)


def make_nodepool(node_class_ref: NodeClassReference, *, name: str = "conformance") -> NodePool:
    """A minimal NodePool using ``node_class_ref``."""
    return NodePool.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": node_class_ref.to_dict(),
                        "requirements": [],
                    }
                }
            },
        }
    )


def make_nodeclaim(
    nodepool: NodePool,
    *,
    requirements: Iterable[Mapping[str, Any]] = (),
    requests: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    name: str | None = None,
) -> NodeClaim:
    """A NodeClaim as the provisioner would create it from ``nodepool``: labelled with
    the pool, requiring it, plus ``requirements`` (node-selector dicts)."""
    pool = nodepool.metadata.name or "conformance"
    return NodeClaim.model_validate(
        {
            "metadata": {
                "name": name or f"conformance-{uuid.uuid4().hex[:10]}",
                "labels": {LABEL_NODEPOOL: pool, **(labels or {})},
            },
            "spec": {
                "nodeClassRef": nodepool.spec.template.spec.node_class_ref.to_dict(),
                "requirements": [
                    {"key": LABEL_NODEPOOL, "operator": "In", "values": [pool]},
                    *requirements,
                ],
                "resources": {"requests": dict(requests or {})},
            },
        }
    )


async def eventually(
    check: Callable[[], Awaitable[T]], *, within: float, what: str
) -> T:
    """Await ``check`` until it returns without raising AssertionError, for at most
    ``within`` seconds (backing off from 50 ms to 1 s); re-raise the last failure."""
    deadline = time.monotonic() + within
    delay = 0.05
    while True:
        try:
            return await check()
        except AssertionError as failure:
            if time.monotonic() >= deadline:
                raise AssertionError(f"{what} (waited {within:g}s): {failure}") from failure
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


class Launcher:
    """Launches NodeClaims through a provider and deletes all of them at the end."""

    def __init__(self, provider: CloudProvider, nodepool: NodePool, *, timeout: float) -> None:
        self.provider = provider
        self.nodepool = nodepool
        self.timeout = timeout
        self.launched: list[NodeClaim] = []

    async def launch(
        self,
        *,
        requirements: Iterable[Mapping[str, Any]] = (),
        requests: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> tuple[NodeClaim, NodeClaim]:
        """Create a NodeClaim; return (what was asked, what was launched)."""
        asked = make_nodeclaim(
            self.nodepool, requirements=requirements, requests=requests, labels=labels
        )
        launched = await self.provider.create(asked)
        self.launched.append(launched)
        return asked, launched

    async def delete_until_gone(self, nodeclaim: NodeClaim) -> int:
        """Call ``delete`` until it raises NodeClaimNotFoundError; return how many calls
        returned normally before that (0 when the instance was already gone)."""
        deadline = time.monotonic() + self.timeout
        calls = 0
        delay = 0.05
        while True:
            try:
                await self.provider.delete(nodeclaim)
            except NodeClaimNotFoundError:
                return calls
            calls += 1
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"delete({nodeclaim.status.provider_id}) never raised "
                    f"NodeClaimNotFoundError in {self.timeout:g}s ({calls} calls)"
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def cleanup(self) -> None:
        """Delete everything launched (the instances a test did not delete itself)."""
        for nodeclaim in self.launched:
            await self.delete_until_gone(nodeclaim)


def _satisfies(labels: Mapping[str, str], requirement: Mapping[str, Any]) -> bool:
    key, op = requirement["key"], requirement["operator"]
    values = list(requirement.get("values") or ())
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt", "Gte", "Lte"):
        if not present or not labels[key].lstrip("-").isdigit():
            return False
        value, bound = int(labels[key]), int(values[0])
        return {
            "Gt": value > bound,
            "Lt": value < bound,
            "Gte": value >= bound,
            "Lte": value <= bound,
        }[op]
    raise ValueError(f"unknown operator {op}")


def _fitting_offerings(
    instance_types: Sequence[InstanceType], requests: Mapping[str, int]
) -> list[tuple[float, str, str, str, InstanceType, Offering]]:
    found = [
        (o.price, it.name, o.zone, o.capacity_type, it, o)
        for it in instance_types
        if res.fits(requests, it.allocatable)
        for o in it.offerings
        if o.available
    ]
    found.sort(key=lambda row: row[:4])
    return found


class CloudProviderConformance:
    """The suite. Subclass it as ``TestSomething`` and provide a ``provider`` fixture."""

    requests: ClassVar[Mapping[str, str]] = {"cpu": "100m", "memory": "64Mi"}
    timeout: ClassVar[float] = 60.0
    well_known_labels: ClassVar[frozenset[str]] = CORE_WELL_KNOWN_LABELS

    # -- fixtures (override as needed) -------------------------------------------------

    @pytest.fixture
    def node_class_ref(self, provider: CloudProvider) -> NodeClassReference:
        """The provider's default NodeClass kind, object name ``default``."""
        kinds = provider.supported_node_classes()
        assert kinds, f"provider {provider.name} declares no NodeClass kinds"
        return NodeClassReference(group=kinds[0].group, kind=kinds[0].kind, name="default")

    @pytest.fixture
    def nodepool(self, node_class_ref: NodeClassReference) -> NodePool:
        """A NodePool named ``conformance`` using ``node_class_ref``."""
        return make_nodepool(node_class_ref)

    @pytest_asyncio.fixture
    async def instance_types(
        self, provider: CloudProvider, nodepool: NodePool
    ) -> Sequence[InstanceType]:
        """What the provider offers the NodePool."""
        return await provider.get_instance_types(nodepool)

    @pytest_asyncio.fixture
    async def launcher(
        self, provider: CloudProvider, nodepool: NodePool
    ) -> AsyncIterator[Launcher]:
        """Launches NodeClaims and deletes them all when the test ends."""
        launcher = Launcher(provider, nodepool, timeout=self.timeout)
        try:
            yield launcher
        finally:
            await launcher.cleanup()

    def _requests(self) -> dict[str, int]:
        return res.parse_resource_list(self.requests)

    def _check_launched(
        self, asked: NodeClaim, launched: NodeClaim, instance_types: Sequence[InstanceType]
    ) -> InstanceType:
        """Assert what every launched NodeClaim must show; return its instance type."""
        assert launched.status.provider_id, "create() returned no status.providerID"
        labels = launched.metadata.labels
        missing = [key for key in _LAUNCH_LABELS if not labels.get(key)]
        assert not missing, f"the launched NodeClaim lacks labels {missing}: {labels}"
        by_name = {it.name: it for it in instance_types}
        it = by_name.get(labels[LABEL_INSTANCE_TYPE])
        assert it is not None, (
            f"launched instance type {labels[LABEL_INSTANCE_TYPE]} is not among "
            "get_instance_types()"
        )
        offered = {(o.zone, o.capacity_type) for o in it.offerings if o.available}
        where = (labels[LABEL_ZONE], labels[LABEL_CAPACITY_TYPE])
        assert where in offered, f"{it.name} has no available offering {where}"
        capacity = res.parse_resource_list(launched.status.capacity)
        allocatable = res.parse_resource_list(launched.status.allocatable)
        for resource in (res.CPU, res.MEMORY):
            assert capacity.get(resource, 0) > 0, f"status.capacity lacks {resource}"
            assert allocatable.get(resource, 0) > 0, f"status.allocatable lacks {resource}"
        assert not res.exceeded(allocatable, capacity), "allocatable exceeds capacity"
        requests = res.parse_resource_list(asked.spec.resources.requests)
        assert res.fits(requests, allocatable), (
            f"allocatable {res.describe(allocatable)} does not fit the requests "
            f"{res.describe(requests)}"
        )
        for requirement in asked.spec.requirements:
            as_dict = requirement.to_dict()
            assert _satisfies(labels, as_dict), (
                f"launched labels {labels} break the requirement {as_dict}"
            )
        return it

    # -- identity ----------------------------------------------------------------------

    def test_implements_the_protocol_and_has_a_name(self, provider: CloudProvider) -> None:
        assert isinstance(provider, CloudProvider)
        assert isinstance(provider.name, str)
        assert provider.name

    def test_declares_the_node_classes_it_serves(self, provider: CloudProvider) -> None:
        kinds = provider.supported_node_classes()
        assert kinds, "supported_node_classes() is empty: NodePools could not refer to it"
        for kind in kinds:
            assert kind.group and kind.version and kind.kind and kind.plural, kind
            assert not kind.namespaced, f"{kind}: NodeClasses are cluster-scoped (namespaced=False)"

    def test_repair_policies_are_well_formed(self, provider: CloudProvider) -> None:
        for policy in provider.repair_policies():
            assert policy.condition_type
            assert policy.condition_status in ("True", "False", "Unknown")
            assert policy.toleration.total_seconds() > 0

    # -- instance types ----------------------------------------------------------------

    def test_instance_types_define_every_well_known_label(
        self, instance_types: Sequence[InstanceType]
    ) -> None:
        assert instance_types, "get_instance_types() returned nothing"
        names = [it.name for it in instance_types]
        assert len(set(names)) == len(names), "instance type names are not unique"
        for it in instance_types:
            missing = sorted(self.well_known_labels - set(it.requirements))
            assert not missing, f"{it.name} does not define {missing}"
            assert it.requirements[LABEL_INSTANCE_TYPE].single() == it.name, (
                f"{it.name}: requirement {it.requirements[LABEL_INSTANCE_TYPE]} "
                "should be In [its name]"
            )

    def test_offerings_carry_zone_capacity_type_and_a_price(
        self, instance_types: Sequence[InstanceType]
    ) -> None:
        for it in instance_types:
            assert it.offerings, f"{it.name} has no offerings"
            for offering in it.offerings:
                assert offering.zone, f"{it.name}: {offering!r} has no zone"
                assert offering.capacity_type, f"{it.name}: {offering!r} has no capacity type"
                assert offering.requirements[LABEL_ZONE].single() == offering.zone
                assert (
                    offering.requirements[LABEL_CAPACITY_TYPE].single() == offering.capacity_type
                )
                assert math.isfinite(offering.price), f"{it.name}: {offering!r} price"
                assert offering.price >= 0, f"{it.name}: {offering!r} has a negative price"
                if offering.available:
                    assert it.requirements[LABEL_ZONE].has(offering.zone), (
                        f"{it.name}: zone {offering.zone} is offered but not in its requirements"
                    )
                    assert it.requirements[LABEL_CAPACITY_TYPE].has(offering.capacity_type)

    def test_allocatable_is_within_capacity(
        self, instance_types: Sequence[InstanceType]
    ) -> None:
        for it in instance_types:
            for resource in (res.CPU, res.MEMORY, res.PODS):
                assert it.capacity.get(resource, 0) > 0, f"{it.name} has no {resource}"
            over = res.exceeded(it.allocatable, it.capacity)
            assert not over, f"{it.name}: allocatable exceeds capacity for {over}"
            assert all(v >= 0 for v in it.allocatable.values()), it.name

    # -- create / get / list / delete --------------------------------------------------

    @pytest.mark.asyncio
    async def test_create_returns_the_launched_nodeclaim(
        self, launcher: Launcher, instance_types: Sequence[InstanceType]
    ) -> None:
        asked, launched = await launcher.launch(
            requests=self.requests, labels={"conformance.karpy.dev/purpose": "create"}
        )
        self._check_launched(asked, launched, instance_types)
        assert launched.metadata.labels.get("conformance.karpy.dev/purpose") == "create", (
            "the NodeClaim's own labels must survive the launch"
        )

    @pytest.mark.asyncio
    async def test_create_honours_instance_type_zone_and_capacity_type(
        self, launcher: Launcher, instance_types: Sequence[InstanceType]
    ) -> None:
        offerings = _fitting_offerings(instance_types, self._requests())
        assert offerings, "no instance type fits the kit's requests"
        # the median offering: not what the provider would pick unconstrained
        _, name, zone, capacity_type, it, _ = offerings[len(offerings) // 2]
        asked, launched = await launcher.launch(
            requests=self.requests,
            requirements=[
                {"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": [name]},
                {"key": LABEL_ZONE, "operator": "In", "values": [zone]},
                {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": [capacity_type]},
            ],
        )
        self._check_launched(asked, launched, instance_types)
        labels = launched.metadata.labels
        assert (labels[LABEL_INSTANCE_TYPE], labels[LABEL_ZONE], labels[LABEL_CAPACITY_TYPE]) == (
            name, zone, capacity_type,
        )
        assert labels[LABEL_ARCH] in it.requirements[LABEL_ARCH].values

    @pytest.mark.asyncio
    async def test_create_honours_not_in_and_larger_requests(
        self, launcher: Launcher, instance_types: Sequence[InstanceType]
    ) -> None:
        offerings = _fitting_offerings(instance_types, self._requests())
        assert offerings, "no instance type fits the kit's requests"
        cheapest_zone = offerings[0][2]
        # ask for more CPU than the cheapest fitting type can give
        bigger = {
            **self.requests,
            res.CPU: res.format_quantity(res.CPU, offerings[0][4].allocatable[res.CPU] + 1),
        }
        if not _fitting_offerings(instance_types, res.parse_resource_list(bigger)):
            pytest.fail("no instance type is larger than the cheapest; the catalogue is too small")
        asked, launched = await launcher.launch(
            requests=bigger,
            requirements=[{"key": LABEL_ZONE, "operator": "NotIn", "values": [cheapest_zone]}],
        )
        self._check_launched(asked, launched, instance_types)
        assert launched.metadata.labels[LABEL_ZONE] != cheapest_zone

    @pytest.mark.asyncio
    async def test_create_with_unsatisfiable_requirements_fails_with_a_typed_error(
        self, launcher: Launcher
    ) -> None:
        with pytest.raises((InsufficientCapacityError, CreateError)):
            await launcher.launch(
                requests=self.requests,
                requirements=[
                    {
                        "key": LABEL_INSTANCE_TYPE,
                        "operator": "In",
                        "values": ["karpy-conformance-no-such-type"],
                    }
                ],
            )

    @pytest.mark.asyncio
    async def test_get_and_list_return_the_launched_instance(
        self, provider: CloudProvider, launcher: Launcher
    ) -> None:
        _, launched = await launcher.launch(requests=self.requests)
        provider_id = launched.status.provider_id or ""

        async def got() -> NodeClaim:
            try:
                return await provider.get(provider_id)
            except NodeClaimNotFoundError as exc:
                raise AssertionError(f"get({provider_id}) raised NotFound") from exc

        found = await eventually(got, within=self.timeout, what="get() finds the instance")
        assert found.status.provider_id == provider_id
        for key in (LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE):
            assert found.metadata.labels.get(key) == launched.metadata.labels[key], key

        async def listed() -> None:
            ids = {nc.status.provider_id for nc in await provider.list()}
            assert provider_id in ids, f"{provider_id} not in list()"

        await eventually(listed, within=self.timeout, what="list() includes the instance")

    @pytest.mark.asyncio
    async def test_delete_until_not_found_then_the_instance_is_gone(
        self, provider: CloudProvider, launcher: Launcher
    ) -> None:
        _, launched = await launcher.launch(requests=self.requests)
        provider_id = launched.status.provider_id or ""
        await launcher.delete_until_gone(launched)

        async def get_raises_not_found() -> None:
            try:
                await provider.get(provider_id)
            except NodeClaimNotFoundError:
                return
            raise AssertionError(f"get({provider_id}) still finds a deleted instance")

        await eventually(get_raises_not_found, within=self.timeout, what="get() forgets it")

        async def unlisted() -> None:
            ids = {nc.status.provider_id for nc in await provider.list()}
            assert provider_id not in ids, f"{provider_id} still in list()"

        await eventually(unlisted, within=self.timeout, what="list() forgets it")

    @pytest.mark.asyncio
    async def test_delete_of_a_gone_instance_raises_not_found(
        self, launcher: Launcher
    ) -> None:
        _, launched = await launcher.launch(requests=self.requests)
        await launcher.delete_until_gone(launched)
        for _ in range(2):
            with pytest.raises(NodeClaimNotFoundError):
                await launcher.provider.delete(launched)

    @pytest.mark.asyncio
    async def test_concurrent_deletes_are_safe(self, launcher: Launcher) -> None:
        _, launched = await launcher.launch(requests=self.requests)
        outcomes = await asyncio.gather(
            *(launcher.provider.delete(launched) for _ in range(3)), return_exceptions=True
        )
        unexpected = [
            o for o in outcomes if o is not None and not isinstance(o, NodeClaimNotFoundError)
        ]
        assert not unexpected, f"concurrent delete() raised {unexpected!r}"
        await launcher.delete_until_gone(launched)

    @pytest.mark.asyncio
    async def test_a_fresh_launch_is_not_drifted(
        self, provider: CloudProvider, launcher: Launcher
    ) -> None:
        asked, launched = await launcher.launch(requests=self.requests)
        # as the lifecycle controller stores it: the asked NodeClaim with launch details
        stored = asked.model_copy(deep=True)
        stored.metadata.labels = {**launched.metadata.labels, **asked.metadata.labels}
        stored.status = launched.status.model_copy(deep=True)
        assert await provider.is_drifted(stored) is None

    @pytest.mark.asyncio
    async def test_launched_labels_satisfy_every_requirement_kind(
        self, launcher: Launcher, instance_types: Sequence[InstanceType]
    ) -> None:
        offerings = _fitting_offerings(instance_types, self._requests())
        assert offerings, "no instance type fits the kit's requests"
        _, _, zone, _, it, _ = offerings[-1]
        arch = it.requirements[LABEL_ARCH].sorted_values()[0]
        asked, launched = await launcher.launch(
            requests=self.requests,
            labels={"conformance.karpy.dev/team": "kit"},
            requirements=[
                {"key": LABEL_ARCH, "operator": "In", "values": [arch]},
                {"key": LABEL_ZONE, "operator": "Exists"},
                {"key": "conformance.karpy.dev/absent", "operator": "DoesNotExist"},
                {"key": LABEL_CAPACITY_TYPE, "operator": "NotIn", "values": ["reserved"]},
                {"key": LABEL_ZONE, "operator": "In", "values": [zone]},
            ],
        )
        self._check_launched(asked, launched, instance_types)
        assert launched.metadata.labels[LABEL_ZONE] == zone
        assert launched.metadata.labels[LABEL_ARCH] == arch
        assert "conformance.karpy.dev/absent" not in launched.metadata.labels
        assert launched.metadata.labels["conformance.karpy.dev/team"] == "kit"
