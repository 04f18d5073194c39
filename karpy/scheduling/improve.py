"""Cost improvement after first fit: move pods between the new NodeClaims of a plan
so that NodeClaims drop to cheaper instance types or disappear.

First fit spreads pods round-robin over the NodeClaims that must exist anyway, and
each NodeClaim is then rounded up to a whole instance type; CPU-heavy and memory-heavy
pods land side by side by chance. :class:`Improver` takes the finished plan and, for
each NodeClaim, looks for pods (one, two, all of a small NodeClaim, or as many of a
large one's smallest pods as it takes) whose removal lets it use a cheaper type or
none, and for other NodeClaims that take those pods in the room their cheapest type
already has; a last pass also accepts NodeClaims that get dearer by less than the move
saves. At the local optimum of those single moves, exchanges: a pod of a NodeClaim for
a smaller one of a NodeClaim with room for the difference, when the pair then costs
less. Every accepted change lowers the plan's total price. A memory-heavy pod thus
goes where CPU binds and memory is spare, which is what pairs complementary pods. Room
is found through :class:`FreeIndex` trees per NodePool and partition.

What keeps it safe: a pod only moves between NodeClaims of the same NodePool whose
requirements agree on every topology key of the solve (so zone counts, zone spreads and
zone (anti-)affinity are untouched), or onto a NodeClaim whose pods no zone-like rule
looks at, which then narrows to the source's domains; the pod must accept the target's
requirements without narrowing them; hostname rules are re-checked against
per-NodeClaim counts (spread maxSkew, anti-affinity both ways); pods with host ports,
volume topology, a required hostname or hostname pod affinity stay where they are; a
NodeClaim keeps only types within the capacity it reserved against its NodePool's
limits; minValues is re-checked. Each NodeClaim ends with every instance type that
fits its pods (Karpenter's rule), not just the one that priced it.

The work is bounded by a budget of evaluations (a setting, proportional to the pods),
not by a clock, so the same input always gives the same plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from operator import ge
from typing import Final

from karpy.apis.labels import LABEL_HOSTNAME
from karpy.scheduling.capacity import Claim
from karpy.scheduling.catalog import Catalog, iter_bits
from karpy.scheduling.freeindex import FreeIndex
from karpy.scheduling.pod import Pod
from karpy.scheduling.reqcache import RequirementCache
from karpy.scheduling.requirements import Requirements
from karpy.scheduling.signature import Signature
from karpy.scheduling.topology import AFFINITY, ANTI_AFFINITY, SPREAD, TopologyGroup
from karpy.scheduling.topologyrules import TopologyRules

__all__ = ["Improver"]

_INF: Final = float("inf")
# How many candidate NodeClaims with enough room one pod's destination search checks
# before giving up (a rule such as a hostname spread can refuse many in a row). 8, not
# 4: on the kwok c/m/r catalogue a zonal pod often finds room only past several
# NodeClaims of other zones (1k/5k/20k pods: 26.4/17.8/19.4 % above the LP floor with
# 4, 19.0/14.6/16.3 % with 8, at the same speed; the benchmark mix is unchanged).
_DESTINATION_TRIES: Final = 8
# A NodeClaim is only emptied when it has at most this many pods (all movable).
_EMPTY_AT_MOST: Final = 8
# A NodeClaim is drained of at most this many of its smallest pods at once.
_DRAIN_AT_MOST: Final = 48
# Passes of the exchange stage over the NodeClaims (it stops early when one finds none).
_SWAP_PASSES: Final = 2
# How many NodeClaims with room for the difference one exchange search checks.
_SWAP_TRIES: Final = 8
# Destination searches of one signature that may fail, with none found, before the
# signature is given up on.
_HOPELESS: Final = 8


class _Item:
    """One pod on a NodeClaim, with the signature it was placed under."""

    __slots__ = ("pod", "sig", "size", "vec")

    def __init__(self, pod: Pod, sig: Signature, vec: list[int]) -> None:
        self.pod = pod
        self.sig = sig
        self.vec = vec
        self.size = sum(vec)


class _Rules:
    """A signature's topology groups as the moves need them: hostname groups that
    count its pods, that it owns, that keep it out, that it feeds; and every group whose
    node filter depends on the NodeClaim's requirements."""

    __slots__ = ("all_counted", "counted", "filtered", "inverse", "inverse_owned", "owned")

    def __init__(self, sig: Signature) -> None:
        self.all_counted = [g for g in sig.counted if g.is_hostname]
        # only spread and anti-affinity rules can refuse a newcomer
        self.counted = [g for g in self.all_counted if g.spec.kind is not AFFINITY]
        self.owned = [(g, own) for g, own in sig.owned if g.is_hostname]
        self.inverse = [g for g in sig.inverse if g.is_hostname]
        self.inverse_owned = [g for g in sig.inverse_owned if g.is_hostname]
        self.filtered = [
            g
            for g in sig.counted
            if g.spec.node_filter is not None
            and (g.spec.node_filter.terms or g.spec.node_filter.taints_honored)
        ]


class _Prices:
    """A catalog's types in price order under one set of offering requirements, with
    prefix masks so that "the cheapest type in this mask" is a bisection."""

    __slots__ = ("order", "prefix", "prices")

    def __init__(self, catalog: Catalog, requirements: Requirements) -> None:
        pricing = catalog.pricing(requirements)
        self.order = pricing.order
        self.prices = pricing.prices
        prefix = [0]
        acc = 0
        for i in self.order:
            acc |= 1 << i
            prefix.append(acc)
        self.prefix = prefix

    def cheapest(self, mask: int) -> tuple[float, int]:
        """The price and index of the cheapest type in ``mask`` (inf, -1 if none)."""
        prefix = self.prefix
        if not mask & prefix[-1]:
            return _INF, -1
        low, high = 1, len(prefix) - 1
        while low < high:
            middle = (low + high) // 2
            if prefix[middle] & mask:
                high = middle
            else:
                low = middle + 1
        index = self.order[low - 1]
        price = self.prices[index]
        return (_INF if price is None else price), index


class Improver:
    """Lowers the price of a finished first-fit plan in place (see the module
    docstring). ``budget`` is the number of evaluations it may spend."""

    def __init__(
        self,
        claims: Sequence[Claim],
        *,
        requirements: RequirementCache,
        topology: TopologyRules,
        strict_min_values: bool,
        budget: int,
        swap_budget: int = 0,
    ) -> None:
        self.claims = [c for c in claims if c.pods]
        self.reqs = requirements
        self.topology = topology
        self.strict_min_values = strict_min_values
        self.budget = budget
        # evaluations the exchange stage may spend on top of what single moves left
        self.swap_budget = swap_budget
        self.moves = 0
        # NodeClaims whose requirements the stage narrowed (see _finish)
        self.narrowed = 0
        self.keys = sorted(k for k in topology.topology_keys if k != LABEL_HOSTNAME)
        self._movable: dict[Signature, bool] = {}
        self._zonal: dict[Signature, bool] = {}
        self._accepts: dict[tuple[Signature, Requirements], bool] = {}
        self._filters: dict[tuple[TopologyGroup, Requirements], bool] = {}
        self._prices: dict[tuple[int, Requirements], _Prices] = {}
        self._alloc: dict[int, list[list[int]]] = {}
        # destination searches that failed / succeeded per signature: a signature that
        # never finds one (a hostname anti-affinity pod when every NodeClaim has its
        # peer) is not searched for again and again
        self._failed: dict[Signature, int] = {}
        self._found: set[Signature] = set()
        self._pins: dict[int, Requirements] = {}
        self._part_ids: dict[tuple[object, ...], int] = {}
        self._largest_cache: dict[tuple[int, int], list[int]] = {}
        self._compatible: dict[tuple[int, Requirements], int] = {}
        self._sig_rules: dict[Signature, _Rules] = {}
        self._fruitless: dict[tuple[Signature, tuple[int, ...], Requirements], int] = {}
        self.grown = 0
        self.swaps = 0
        self._vectors: list[list[int]] = []
        self._no_place: set[tuple[tuple[Signature, tuple[int, ...]], ...]] = set()

    # ------------------------------------------------------------------ setup

    def run(self) -> None:
        """Improve the plan; the claims' pods, requirements, totals and masks are
        updated."""
        claims = self.claims
        if len(claims) < 2 or self.budget <= 0:
            return
        self.items = [self._items(c) for c in claims]
        # what first fit gave each NodeClaim, to tell when the stage narrowed one
        self.first_req = [c.req for c in claims]
        self.totals = [list(c.total) for c in claims]
        self.size = len(self.totals[0])
        self.none = [-1] * self.size
        self.base = [self._base(c) for c in claims]
        self.pricing = [self._pricing(c) for c in claims]
        self.part_key = [self._part_key(c) for c in claims]
        # a NodeClaim's position in its NodePool's indexes
        self.slot = [0] * len(claims)
        self.peers: dict[int, list[int]] = {}
        for number, claim in enumerate(claims):
            peers = self.peers.setdefault(claim.template.index, [])
            self.slot[number] = len(peers)
            peers.append(number)
        self.owners: list[dict[TopologyGroup, int]] = []
        self.zonal = [0] * len(claims)
        for number, items in enumerate(self.items):
            owned: dict[TopologyGroup, int] = {}
            for item in items:
                for group, _ in item.sig.owned:
                    if group.is_hostname:
                        owned[group] = owned.get(group, 0) + 1
                if self._is_zonal(item.sig):
                    self.zonal[number] += 1
            self.owners.append(owned)
        self.price = [0.0] * len(claims)
        self.slack: list[list[int]] = [self.none for _ in claims]
        self.grow: list[list[int]] = [self.none for _ in claims]
        for number in range(len(claims)):
            self._reprice(number)
        # Free-room indexes per NodePool, built when first asked: ("all",) holds every
        # NodeClaim, ("part", key) those whose topology-key requirements are ``key``,
        # and ("neutral",) those whose pods no zone-like rule looks at.
        self.indexes: dict[tuple[int, tuple[object, ...]], FreeIndex] = {}
        self.live: list[set[tuple[object, ...]]] = [self._wanted(n) for n in range(len(claims))]
        # First only moves into room that is already paid for; once those run out,
        # also moves that make another NodeClaim dearer by less than they save.
        # A pass over the NodeClaims is repeated while it still finds much to do; the
        # last pass only looks for moves that raise another NodeClaim's price.
        self.growing = False
        while self.budget > 0:
            before = self.moves
            for number in range(len(claims)):
                if self.budget <= 0:
                    break
                # While one NodeClaim is worked on, the others only lose room, so a
                # pod that found no place stays without one: it is not searched again.
                self._no_place.clear()
                while self.budget > 0 and self._improve(number):
                    pass
            if self.growing:
                break
            if self.moves - before <= len(claims):
                self.growing = True
                self._failed.clear()
        # At the local optimum of single moves, exchanges: a pod of a NodeClaim just
        # above a size for a smaller one of a NodeClaim with room (sizes that double
        # leave many NodeClaims a pod's difference above the next size down).
        self.growing = False
        self.budget = max(self.budget, 0) + self.swap_budget
        # moves only relocate pods, so the vectors in play are fixed: listed once
        self._vectors = self._swap_vectors()
        for _ in range(_SWAP_PASSES):
            before = self.swaps
            for number in sorted(range(len(claims)), key=lambda n: -self.price[n]):
                if self.budget <= 0:
                    break
                while self.budget > 0 and self._swap(number):
                    pass
            if self.swaps == before or self.budget <= 0:
                break
            # an exchange leaves room where single moves found none
            for number in range(len(claims)):
                self._no_place.clear()
                while self.budget > 0 and self._improve(number):
                    pass
        self._finish()

    def _items(self, claim: Claim) -> list[_Item]:
        out: list[_Item] = []
        position = 0
        for sig, vec, count in claim.runs:
            for pod in claim.pods[position : position + count]:
                out.append(_Item(pod, sig, vec))
            position += count
        return out

    def _part_key(self, claim: Claim) -> int:
        """The NodeClaim's partition: a number per distinct set of requirements on
        the topology keys (compared far more often than computed)."""
        key = tuple(claim.req.get(k) for k in self.keys)
        return self._part_ids.setdefault(key, len(self._part_ids))

    def _base(self, claim: Claim) -> int:
        """Types the NodeClaim may use whatever its pods: compatible with its
        requirements, and within the capacity it reserved against NodePool limits."""
        template = claim.template
        catalog = template.catalog
        key = (id(catalog), claim.req)
        mask = self._compatible.get(key)
        if mask is None:
            mask = catalog.compatible_mask(claim.req)
            self._compatible[key] = mask
        if template.limited and claim.reserved:
            mask &= catalog.within_mask(claim.reserved)
        return mask & claim.volume_mask

    def _pricing(self, claim: Claim) -> _Prices:
        key = (id(claim.template.catalog), claim.req)
        prices = self._prices.get(key)
        if prices is None:
            prices = _Prices(claim.template.catalog, claim.req)
            self._prices[key] = prices
        return prices

    def _allocatable(self, claim: Claim) -> list[list[int]]:
        catalog = claim.template.catalog
        vectors = self._alloc.get(id(catalog))
        if vectors is None:
            names = catalog.resource_names
            vectors = [[it.allocatable.get(n, 0) for n in names] for it in catalog.types]
            self._alloc[id(catalog)] = vectors
        return vectors

    # ------------------------------------------------------------------ indexes

    def _wanted(self, number: int) -> set[tuple[object, ...]]:
        """The indexes NodeClaim ``number`` belongs to now."""
        if not self.items[number]:
            return set()
        key = self.part_key[number]
        wanted: set[tuple[object, ...]] = {("all",), ("part", key), ("grow-all",), ("grow", key)}
        if not self.zonal[number]:
            wanted.add(("neutral",))
            wanted.add(("grow-neutral",))
        return wanted

    def _vector(self, number: int, name: tuple[object, ...]) -> list[int]:
        """What an index entry holds: the room of the cheapest type, or for the
        ``grow`` indexes the room left if the NodeClaim grew to its largest types."""
        if str(name[0]).startswith("grow"):
            return self.grow[number]
        return self.slack[number]

    def _index(self, template: int, name: tuple[object, ...]) -> FreeIndex:
        index = self.indexes.get((template, name))
        if index is None:
            rooms = [
                self._vector(n, name) if name in self.live[n] else self.none
                for n in self.peers[template]
            ]
            index = FreeIndex(rooms, self.size)
            self.indexes[(template, name)] = index
        return index

    def _sync(self, number: int) -> None:
        """Bring NodeClaim ``number``'s entries in the built indexes up to date."""
        template = self.claims[number].template.index
        slot = self.slot[number]
        wanted = self._wanted(number)
        for name in self.live[number] - wanted:
            index = self.indexes.get((template, name))
            if index is not None:
                index.update(slot, self.none)
        self.live[number] = wanted
        for name in wanted:
            index = self.indexes.get((template, name))
            if index is not None:
                index.update(slot, self._vector(number, name))

    # ------------------------------------------------------------------ prices

    def _types(self, number: int, total: list[int], base: int | None = None) -> int:
        """The types that hold ``total`` on NodeClaim ``number`` (with DaemonSets)."""
        claim = self.claims[number]
        template = claim.template
        catalog = template.catalog
        if base is None:
            base = self.base[number]
        if template.simple_fit:
            return base & catalog.fit_mask(total)
        mask = 0
        ports = claim.ports
        for group in template.groups:
            if ports and any(p.conflicts(q) for p in ports for q in group.host_ports):
                continue
            need = [a + b for a, b in zip(total, group.overhead, strict=True)]
            mask |= group.mask & catalog.fit_mask(need)
        return base & mask

    def _cost(self, number: int, total: list[int]) -> float:
        self.budget -= 1
        return self.pricing[number].cheapest(self._types(number, total))[0]

    def _reprice(self, number: int) -> None:
        """Recompute a NodeClaim's price and the room its cheapest type leaves."""
        total = self.totals[number]
        if not self.items[number]:
            # emptied: it will not be launched, and nothing may move back onto it
            self.price[number] = 0.0
            self.slack[number] = self.none
            self.grow[number] = self.none
            return
        price, cheapest = self.pricing[number].cheapest(self._types(number, total))
        self.price[number] = price
        self.slack[number] = self._room_of(number, cheapest, total) or self.none
        largest = self._largest(number)
        self.grow[number] = [a - t for a, t in zip(largest, total, strict=True)]

    def _largest(self, number: int) -> list[int]:
        """Per resource, the most any type the NodeClaim may use allocates (less the
        smallest DaemonSet overhead): a bound on what it could ever hold."""
        claim = self.claims[number]
        base = self.base[number]
        key = (id(claim.template.catalog), base)
        largest = self._largest_cache.get(key)
        if largest is None:
            vectors = self._allocatable(claim)
            largest = [0] * self.size
            for i in iter_bits(base):
                largest = [max(a, b) for a, b in zip(largest, vectors[i], strict=True)]
            overheads = [g.overhead for g in claim.template.groups if g.mask & base]
            if overheads:
                least = [min(column) for column in zip(*overheads, strict=True)]
                largest = [a - o for a, o in zip(largest, least, strict=True)]
            self._largest_cache[key] = largest
        return largest

    def _room_of(self, number: int, cheapest: int, total: list[int]) -> list[int] | None:
        """What type ``cheapest`` leaves free on NodeClaim ``number`` holding ``total``."""
        if cheapest < 0:
            return None
        claim = self.claims[number]
        overhead: Sequence[int] = ()
        for group in claim.template.groups:
            if group.mask >> cheapest & 1:
                overhead = group.overhead
                break
        allocatable = self._allocatable(claim)[cheapest]
        if overhead:
            return [a - o - t for a, o, t in zip(allocatable, overhead, total, strict=True)]
        return [a - t for a, t in zip(allocatable, total, strict=True)]

    # ------------------------------------------------------------------ moves

    def _improve(self, number: int) -> bool:
        """One change that lowers NodeClaim ``number``'s price without raising any
        other's; whether one was made."""
        price = self.price[number]
        if price == _INF or price <= 0:
            return False
        items = self.items[number]
        movable = [
            item for item in items if self._is_movable(item.sig) and not self._hopeless(item.sig)
        ]
        if not movable:
            return False
        total = self.totals[number]
        if len(movable) == len(items) <= _EMPTY_AT_MOST and self._relocate(
            number, sorted(items, key=lambda i: -i.size), price
        ):
            return True
        # Pods of equal signature and requests are interchangeable: one stands for all.
        distinct: dict[tuple[Signature, tuple[int, ...]], _Item] = {}
        for item in movable:
            distinct.setdefault((item.sig, tuple(item.vec)), item)
        # Smallest pods first: they are the easiest to place elsewhere.
        kinds = sorted(distinct.items(), key=lambda entry: entry[1].size)
        gains: dict[tuple[int, ...], float] = {}
        for kind, item in kinds:
            if (kind,) in self._no_place:
                continue
            saved = gains.get(kind[1])
            if saved is None:
                left = [a - b for a, b in zip(total, item.vec, strict=True)]
                saved = price - self._cost(number, left)
                gains[kind[1]] = saved
            if saved > 1e-9 and self._relocate(number, [item], saved):
                return True
        if len(movable) > 12:
            # Drain: the smallest pods, as many as it takes for a cheaper type (where
            # sizes double, one or two pods are rarely enough).
            removed: list[_Item] = []
            left = list(total)
            for item in sorted(movable, key=lambda i: i.size)[:_DRAIN_AT_MOST]:
                left = [a - b for a, b in zip(left, item.vec, strict=True)]
                removed.append(item)
                if len(removed) < 3:
                    continue
                saved = price - self._cost(number, left)
                if saved > 1e-9:
                    return self._relocate(number, removed[::-1], saved)
            return False
        if self.budget <= 0 or self.growing:
            return False
        pairs: list[tuple[int, int, int, _Item, _Item, float]] = []
        for (i, first), (j, second) in combinations(enumerate(movable), 2):
            left = [a - b - c for a, b, c in zip(total, first.vec, second.vec, strict=True)]
            saved = price - self._cost(number, left)
            if saved > 1e-9:
                pairs.append((first.size + second.size, i, j, first, second, saved))
        pairs.sort(key=lambda entry: entry[:3])
        for _, _, _, first, second, saved in pairs:
            ordered = [first, second] if first.size >= second.size else [second, first]
            if self._relocate(number, ordered, saved):
                return True
        return False

    def _swap(self, number: int) -> bool:
        """Exchange one pod of NodeClaim ``number`` for a smaller one of another
        NodeClaim when the pair then costs less; whether one was made."""
        price = self.price[number]
        if price == _INF or price <= 0:
            return False
        total = self.totals[number]
        template = self.claims[number].template.index
        peers = self.peers[template]
        distinct: dict[tuple[Signature, tuple[int, ...]], _Item] = {}
        for item in self.items[number]:
            if self._is_movable(item.sig):
                distinct.setdefault((item.sig, tuple(item.vec)), item)
        # what a smaller pod may be, from the vectors of the pods in play
        vectors = self._vectors
        for item in sorted(distinct.values(), key=lambda i: -i.size):
            if self.budget <= 0:
                return False
            left = [a - b for a, b in zip(total, item.vec, strict=True)]
            if price - self._cost(number, left) <= 1e-9:
                continue  # not even losing it outright would help
            # the smaller pods that, in its place, let this NodeClaim step down
            cheaper = self._cheaper(number, left)
            wanted: set[tuple[int, ...]] = set()
            for vec in vectors:
                if sum(vec) >= item.size:
                    break
                if cheaper is None:
                    taken = [a + b for a, b in zip(left, vec, strict=True)]
                    fits = price - self._cost(number, taken) > 1e-9
                else:
                    fits = any(all(map(ge, room, vec)) for room in cheaper)
                if fits:
                    wanted.add(tuple(vec))
            if not wanted:
                continue
            # another NodeClaim must have room for the difference
            need = [max(min(a - w[i] for w in wanted), 0) for i, a in enumerate(item.vec)]
            if self._is_zonal(item.sig):
                name: tuple[object, ...] = ("part", self.part_key[number])
            else:
                name = ("all",)
            index = self._index(template, name)
            slot = index.find(need)
            tried = 0
            while slot is not None and tried < _SWAP_TRIES and self.budget > 0:
                other = peers[slot]
                slot = index.find(need, slot + 1)
                if other == number or not self.items[other]:
                    continue
                tried += 1
                self.budget -= 1
                if self._exchange(number, item, other, wanted):
                    return True
        return False

    def _cheaper(self, number: int, left: list[int]) -> list[list[int]] | None:
        """For a NodeClaim without DaemonSet variants: the room over ``left`` that each
        type it may use for less than now leaves, those that hold ``left`` and are not
        outdone by another's (None when DaemonSets make the fit depend on the type; the
        caller then prices)."""
        claim = self.claims[number]
        if not claim.template.simple_fit:
            return None
        pricing = self.pricing[number]
        base = self.base[number]
        vectors = self._allocatable(claim)
        price = self.price[number]
        out: list[list[int]] = []
        for i in pricing.order:
            cost = pricing.prices[i]
            if cost is None or cost >= price - 1e-9:
                break
            if not base >> i & 1:
                continue
            room = [a - b for a, b in zip(vectors[i], left, strict=True)]
            # a room short anywhere holds no pod; one inside another's adds nothing
            # (large catalogues list hundreds of cheaper types, most of them either)
            if min(room) >= 0 and not any(all(map(ge, kept, room)) for kept in out):
                out.append(room)
        return out

    def _swap_vectors(self) -> list[list[int]]:
        """The distinct request vectors of movable pods, smallest first."""
        seen: dict[tuple[int, ...], None] = {}
        for items in self.items:
            for item in items:
                if self._is_movable(item.sig):
                    seen.setdefault(tuple(item.vec), None)
        return [list(v) for v in sorted(seen, key=lambda v: (sum(v), v))]

    def _exchange(self, number: int, item: _Item, other: int, wanted: set[tuple[int, ...]]) -> bool:
        """Swap ``item`` (on ``number``) with a pod on ``other`` whose requests are
        ``wanted`` and for which ``other`` has room, if the rules allow it and the two
        then cost less than before."""
        before = self.price[number] + self.price[other]
        if self._is_zonal(item.sig) and self.part_key[number] != self.part_key[other]:
            return False
        slack = self.slack[other]
        for peer in self.items[other]:
            if (
                tuple(peer.vec) not in wanted
                or not self._is_movable(peer.sig)
                or not all(s + q >= p for s, q, p in zip(slack, peer.vec, item.vec, strict=True))
            ):
                continue
            # (a zonal ``item`` already made the two share their domains, above)
            if self._is_zonal(peer.sig) and self.part_key[number] != self.part_key[other]:
                continue
            # the pod coming in is checked while ``item`` is still there (stricter)
            if not self._accepts_pod(peer, other, number, None):
                continue
            self._move(peer, other, number, None)
            if self._accepts_pod(item, number, other, None):
                self._move(item, number, other, None)
                after = self.price[number] + self.price[other]
                if (
                    after < before - 1e-9
                    and self._min_values_hold(number, self.totals[number])
                    and self._min_values_hold(other, self.totals[other])
                ):
                    self.swaps += 1
                    self.moves += 1
                    return True
                self._move(item, other, number, None)
            self._move(peer, number, other, None)
            return False
        return False

    def _relocate(self, source: int, items: list[_Item], saved: float) -> bool:
        """Move ``items`` off NodeClaim ``source`` (which saves ``saved`` $/h) into
        other NodeClaims, raising their prices by less than that in all, or change
        nothing; whether they moved."""
        kinds = tuple((item.sig, tuple(item.vec)) for item in items)
        if kinds in self._no_place:
            return False
        done: list[tuple[_Item, int, Requirements | None]] = []
        allowance = saved
        for item in items:
            found = self._destination(source, item, allowance)
            if found is None:
                for moved, where, pinned in reversed(done):
                    self._move(moved, where, source, None)
                    if pinned is not None:
                        self._pin(where, pinned)
                self._no_place.add(kinds)
                return False
            target, pinned, increase = found
            allowance -= increase
            before = self.claims[target].req if pinned is not None else None
            self._move(item, source, target, pinned)
            done.append((item, target, before))
        self.moves += 1
        return True

    def _destination(
        self, source: int, item: _Item, allowance: float
    ) -> tuple[int, Requirements | None, float] | None:
        """A NodeClaim (not ``source``) whose rules accept ``item`` and that holds it
        for less than ``allowance`` more $/h -- one whose cheapest type has room for
        it at no extra cost if there is one --, the requirements it must narrow to
        (None: as is), and the extra cost."""
        sig = item.sig
        if self._hopeless(sig):
            return None
        # A search that found nothing stays fruitless until some NodeClaim gains room
        # (a move's source does): remember it with the count of moves so far.
        memo = (sig, tuple(item.vec), self.claims[source].req)
        if not self.growing and self._fruitless.get(memo) == self.grown:
            return None
        template = self.claims[source].template.index
        peers = self.peers[template]
        passed_source = False
        if not self._is_zonal(sig):
            searches: list[tuple[object, ...]] = [("all",), ("grow-all",)]
        else:
            key = self.part_key[source]
            searches = [("neutral",), ("part", key), ("grow", key), ("grow-neutral",)]
        need = item.vec
        tries = 0
        for name in searches:
            grows = str(name[0]).startswith("grow")
            if grows != self.growing:
                continue
            limit = allowance - 1e-9 if grows else 1e-9
            if limit <= 0:
                continue
            index = self._index(template, name)
            slot = index.find(need)
            tried = 0
            # growing, the first NodeClaims with room are the likeliest to be cheap
            most = 1 if grows else _DESTINATION_TRIES
            while slot is not None and tried < most and self.budget > 0:
                target = peers[slot]
                slot = index.find(need, slot + 1)
                if target == source:
                    passed_source = True
                    continue
                tried += 1
                self.budget -= 1
                pinned = self._pinned(source, target, item)
                if pinned is False:
                    continue
                reqs = None if pinned is True else pinned
                if not self._accepts_pod(item, source, target, reqs):
                    continue
                increase = self._increase(target, item, reqs)
                if increase is not None and increase < limit:
                    self._found.add(sig)
                    return target, reqs, max(increase, 0.0)
            tries += tried
        if tries:
            self._failed[sig] = self._failed.get(sig, 0) + 1
        if not passed_source:
            self._fruitless[memo] = self.grown
        return None

    def _pinned(self, source: int, target: int, item: _Item) -> Requirements | bool:
        """Whether ``item`` may go to ``target`` as far as topology keys go: True as
        it is, False not at all, or the requirements ``target`` must narrow to (a
        NodeClaim whose pods no zone-like rule looks at takes the source's domains)."""
        if not self._is_zonal(item.sig) or self.part_key[source] == self.part_key[target]:
            return True
        if self.zonal[target]:
            return False
        here = self.claims[source].req
        there = self.claims[target].req
        pins = self._pins.get(self.part_key[source])
        if pins is None:
            pins = Requirements(r for k in self.keys if (r := here.get(k)) is not None)
            self._pins[self.part_key[source]] = pins
        merged = self.reqs.merge(there, pins)
        if isinstance(merged, str):
            return False
        if any(merged.get(k) != here.get(k) for k in self.keys):
            return False
        return merged

    def _increase(self, target: int, item: _Item, reqs: Requirements | None) -> float | None:
        """How much more ``target`` costs with ``item`` (and ``reqs``, if it must
        narrow), or None if no type holds it or minValues would break."""
        claim = self.claims[target]
        total = [a + b for a, b in zip(self.totals[target], item.vec, strict=True)]
        if reqs is None:
            mask = self._types(target, total)
            pricing = self.pricing[target]
            req = claim.req
        else:
            base = self._base_for(claim, reqs)
            mask = self._types(target, total, base)
            pricing = self._prices_for(claim, reqs)
            req = reqs
        price = pricing.cheapest(mask)[0]
        if price == _INF:
            return None
        if (
            self.strict_min_values
            and req.has_min_values()
            and claim.template.catalog.min_values_reason(req, mask) is not None
        ):
            return None
        return price - self.price[target]

    def _base_for(self, claim: Claim, reqs: Requirements) -> int:
        saved = claim.req
        claim.req = reqs
        try:
            return self._base(claim)
        finally:
            claim.req = saved

    def _prices_for(self, claim: Claim, reqs: Requirements) -> _Prices:
        saved = claim.req
        claim.req = reqs
        try:
            return self._pricing(claim)
        finally:
            claim.req = saved

    def _pin(self, number: int, reqs: Requirements) -> None:
        """Give NodeClaim ``number`` the requirements ``reqs`` (narrowed or restored)."""
        claim = self.claims[number]
        claim.req = reqs
        self.base[number] = self._base(claim)
        self.pricing[number] = self._pricing(claim)
        self.part_key[number] = self._part_key(claim)
        self._reprice(number)
        self._sync(number)

    def _hopeless(self, sig: Signature) -> bool:
        return sig not in self._found and self._failed.get(sig, 0) >= _HOPELESS

    def _min_values_hold(self, number: int, total: list[int]) -> bool:
        claim = self.claims[number]
        if not self.strict_min_values or not claim.req.has_min_values():
            return True
        mask = self._types(number, total)
        return claim.template.catalog.min_values_reason(claim.req, mask) is None

    def _move(self, item: _Item, source: int, target: int, pinned: Requirements | None) -> None:
        sig = item.sig
        self.grown += 1
        if pinned is not None:
            claim = self.claims[target]
            claim.req = pinned
            self.base[target] = self._base(claim)
            self.pricing[target] = self._pricing(claim)
            self.part_key[target] = self._part_key(claim)
        self.items[source].remove(item)
        self.items[target].append(item)
        vec = item.vec
        self.totals[source] = [a - b for a, b in zip(self.totals[source], vec, strict=True)]
        self.totals[target] = [a + b for a, b in zip(self.totals[target], vec, strict=True)]
        here = self.claims[source]
        there = self.claims[target]
        rules = self._rules(sig)
        for group in rules.all_counted:
            if self._counts_on(group, here):
                _shift(group, here.hostname, there.hostname)
        for group in rules.inverse_owned:
            _shift(group, here.hostname, there.hostname)
        for group, _ in rules.owned:
            self.owners[source][group] -= 1
            self.owners[target][group] = self.owners[target].get(group, 0) + 1
        if self._is_zonal(sig):
            self.zonal[source] -= 1
            self.zonal[target] += 1
        for number in (source, target):
            self._reprice(number)
            self._sync(number)

    # ------------------------------------------------------------------ rules

    def _is_movable(self, sig: Signature) -> bool:
        movable = self._movable.get(sig)
        if movable is None:
            movable = not (
                sig.host_ports
                or sig.pod.volume_requirements
                or sig.pod.volumes
                or sig.hostname is not None
                or any(g.is_hostname and g.kind is AFFINITY for g, _ in sig.owned)
                or any(g.is_hostname and g.kind is AFFINITY for g in sig.counted)
            )
            self._movable[sig] = movable
        return movable

    def _is_zonal(self, sig: Signature) -> bool:
        """Whether a rule on a key other than the hostname looks at the pod (it may
        then only move between NodeClaims in the same domains)."""
        zonal = self._zonal.get(sig)
        if zonal is None:
            zonal = (
                any(not g.is_hostname for g, _ in sig.owned)
                or any(not g.is_hostname for g in sig.counted)
                or any(not g.is_hostname for g in sig.inverse)
                or any(not g.is_hostname for g in sig.inverse_owned)
            )
            self._zonal[sig] = zonal
        return zonal

    def _counts_on(
        self, group: TopologyGroup, claim: Claim, reqs: Requirements | None = None
    ) -> bool:
        """Whether ``group`` counts pods placed on ``claim`` (its node filter)."""
        node_filter = group.spec.node_filter
        if node_filter is None or (not node_filter.terms and not node_filter.taints_honored):
            return True
        req = claim.req if reqs is None else reqs
        key = (group, req)
        counted = self._filters.get(key)
        if counted is None:
            counted = node_filter.matches(claim.template.taints, req, self.topology.well_known)
            self._filters[key] = counted
        return counted

    def _accepts_pod(
        self, item: _Item, source: int, target: int, pinned: Requirements | None
    ) -> bool:
        """Whether the pod may go from ``source`` to ``target`` (whose requirements
        become ``pinned`` if given) without breaking a rule its first placement kept."""
        sig = item.sig
        here = self.claims[source]
        there = self.claims[target]
        req = there.req if pinned is None else pinned
        key = (sig, req)
        accepted = self._accepts.get(key)
        if accepted is None:
            merged = self.reqs.merge(req, sig.claim_requirements)
            accepted = not isinstance(merged, str) and merged == req
            self._accepts[key] = accepted
        if not accepted:
            return False
        rules = self._rules(sig)
        for group in rules.filtered:
            if self._counts_on(group, here) != self._counts_on(group, there, req):
                return False
        host = there.hostname
        owners = self.owners[target]
        for group in rules.counted:
            if not owners.get(group):
                continue
            if group.spec.kind is ANTI_AFFINITY:
                return False
            if group.counts.get(host, 0) + 1 > group.spec.max_skew:
                return False
        for group, self_selected in rules.owned:
            count = group.counts.get(host, 0)
            if group.spec.kind is ANTI_AFFINITY and count > 0:
                return False
            if group.spec.kind is SPREAD and count + self_selected > group.spec.max_skew:
                return False
        return all(not group.counts.get(host, 0) for group in rules.inverse)

    def _rules(self, sig: Signature) -> _Rules:
        rules = self._sig_rules.get(sig)
        if rules is None:
            rules = _Rules(sig)
            self._sig_rules[sig] = rules
        return rules

    # ------------------------------------------------------------------ results

    def _finish(self) -> None:
        for number, claim in enumerate(self.claims):
            items = self.items[number]
            runs: list[tuple[Signature, list[int], int]] = []
            pods: list[Pod] = []
            for item in items:
                pods.append(item.pod)
                if runs and runs[-1][0] is item.sig and runs[-1][1] == item.vec:
                    sig, vec, count = runs[-1]
                    runs[-1] = (sig, vec, count + 1)
                else:
                    runs.append((item.sig, item.vec, 1))
            claim.pods = pods
            claim.runs = runs
            claim.total = self.totals[number]
            if pods:
                claim.mask = self._types(number, claim.total)
                # Narrowed: it took a zonal pod by giving up zones (and with them,
                # maybe, types) that first fit left open. Reported, not hidden.
                if claim.req != self.first_req[number]:
                    claim.narrowed = True
                    self.narrowed += 1


def _shift(group: TopologyGroup, source: str, target: str) -> None:
    """Move one counted pod of ``group`` from domain ``source`` to ``target``."""
    counts = group.counts
    left = counts.get(source, 0) - 1
    counts[source] = left
    if left == 0:
        group.nonzero -= 1
    group.record(target)
