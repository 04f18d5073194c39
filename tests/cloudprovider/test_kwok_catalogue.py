"""The kwok provider's catalogue looks like Karpenter's kwok catalogue (families by
vCPU:memory ratio, 1..256 vCPU, spot and on-demand in four zones, spot cheaper), and a
catalogue file in Karpenter kwok's JSON format loads, or fails naming the bad entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from karpy.cloudprovider.kwok import (
    CatalogueError,
    dump_catalogue,
    generate_catalogue,
    load_catalogue,
    to_instance_types,
)

GIB = 2**30


def test_generated_catalogue_spans_families_sizes_zones_and_capacity_types() -> None:
    specs = generate_catalogue()
    by_name = {s.name: s for s in specs}
    assert len(by_name) == len(specs) == 12 * 3 * 2 * 2
    c4 = by_name["c-4x-amd64-linux"]
    assert c4.resources["cpu"] == "4"
    assert c4.resources["memory"] == "8Gi"
    assert by_name["m-4x-amd64-linux"].resources["memory"] == "16Gi"
    assert by_name["r-4x-arm64-windows"].resources["memory"] == "32Gi"
    assert c4.architecture == "amd64"
    assert c4.operating_systems == ("linux",)
    cpus = sorted({int(s.resources["cpu"]) for s in specs})
    assert cpus[0] == 1
    assert cpus[-1] == 256
    assert {(o.zone, o.capacity_type) for o in c4.offerings} == {
        (z, ct)
        for z in ("test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d")
        for ct in ("spot", "on-demand")
    }


def test_prices_grow_with_resources_and_spot_is_cheaper() -> None:
    by_name = {s.name: s for s in generate_catalogue()}

    def price(name: str, capacity_type: str) -> float:
        return next(
            o.price for o in by_name[name].offerings if o.capacity_type == capacity_type
        )

    assert price("c-4x-amd64-linux", "on-demand") == pytest.approx(
        0.025 * 4 + 0.001 * 8 * GIB / 1e9
    )
    assert price("c-4x-amd64-linux", "spot") < price("c-4x-amd64-linux", "on-demand")
    assert price("c-4x-amd64-linux", "on-demand") < price("m-4x-amd64-linux", "on-demand")
    assert price("m-4x-amd64-linux", "on-demand") < price("m-8x-amd64-linux", "on-demand")


def test_a_catalogue_round_trips_through_the_json_format(tmp_path: Path) -> None:
    specs = generate_catalogue(sizes=(2, 8), zones=("z1",))
    path = tmp_path / "types.json"
    path.write_text(dump_catalogue(specs))
    raw = json.loads(path.read_text())
    # Karpenter kwok's field names, so its instance_types.json loads unchanged
    assert set(raw[0]) == {"name", "architecture", "operatingSystems", "resources", "offerings"}
    assert set(raw[0]["offerings"][0]) == {"Price", "Available", "Requirements"}
    assert load_catalogue(path) == specs


def test_a_karpenter_kwok_entry_loads_and_keeps_unavailable_offerings(tmp_path: Path) -> None:
    entry = {
        "name": "c-1x-amd64-linux",
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {"cpu": "1", "memory": "2Gi", "pods": "16", "ephemeral-storage": "20Gi"},
        "offerings": [
            {
                "Price": 0.019,
                "Available": False,
                "Requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                    {"key": "topology.kubernetes.io/zone", "operator": "In",
                     "values": ["test-zone-a"]},
                ],
            }
        ],
    }
    path = tmp_path / "types.json"
    path.write_text(json.dumps([entry]))
    (spec,) = load_catalogue(path)
    assert spec.name == "c-1x-amd64-linux"
    (offering,) = spec.offerings
    assert (offering.zone, offering.capacity_type, offering.available) == (
        "test-zone-a", "spot", False
    )
    # the instance type keeps the unavailable offering, marked, and offers no zone
    (it,) = to_instance_types([spec])
    assert [(o.zone, o.available) for o in it.offerings] == [("test-zone-a", False)]
    assert it.requirements["topology.kubernetes.io/zone"].sorted_values() == []


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "cannot read"),
        ('{"name": "x"}', "must be a JSON list"),
        ('[{"name": "lonely"}]', "entry lonely"),
        (
            json.dumps([{
                "name": "nozone", "architecture": "amd64", "operatingSystems": ["linux"],
                "resources": {"cpu": "1", "memory": "1Gi"},
                "offerings": [{"Price": 1, "Requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In",
                     "values": ["spot"]}]}],
            }]),
            "entry nozone.*topology.kubernetes.io/zone",
        ),
        (
            json.dumps([{
                "name": "cheap", "architecture": "amd64", "operatingSystems": ["linux"],
                "resources": {"cpu": "1", "memory": "1Gi"},
                "offerings": [{"Price": -1, "Requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}],
            }]),
            "entry cheap.*greater than or equal to 0",
        ),
    ],
    ids=["not-json", "not-a-list", "missing-fields", "offering-without-zone", "negative-price"],
)
def test_a_bad_catalogue_file_is_rejected_naming_the_file_and_entry(
    tmp_path: Path, content: str, expected: str
) -> None:
    path = tmp_path / "types.json"
    path.write_text(content)
    with pytest.raises(CatalogueError, match=expected) as raised:
        load_catalogue(path)
    assert str(path) in str(raised.value)


def test_duplicate_names_are_rejected(tmp_path: Path) -> None:
    spec = generate_catalogue(sizes=(1,), architectures=("amd64",), operating_systems=("linux",))
    path = tmp_path / "types.json"
    path.write_text(dump_catalogue([spec[0], spec[0]]))
    with pytest.raises(CatalogueError, match="duplicate names c-1x-amd64-linux"):
        load_catalogue(path)


def test_a_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(CatalogueError, match="cannot read instance-type catalogue"):
        load_catalogue(tmp_path / "absent.json")


def _reserved_entry(name: str, *requirements: dict[str, object], **extra: object) -> str:
    return json.dumps([{
        "name": name, "architecture": "amd64", "operatingSystems": ["linux"],
        "resources": {"cpu": "4", "memory": "16Gi"},
        "offerings": [{"Price": 0.001, "Requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]},
            *requirements,
        ], **extra}],
    }])


def test_a_reserved_offering_names_its_reservation_and_capacity(tmp_path: Path) -> None:
    path = tmp_path / "types.json"
    path.write_text(_reserved_entry(
        "booked",
        {"key": "karpenter.kwok.sh/reservation-id", "operator": "In", "values": ["cr-1"]},
        ReservationCapacity=3,
    ))
    (it,) = to_instance_types(load_catalogue(path))
    (offering,) = it.offerings
    assert offering.reserved
    assert (offering.reservation_id, offering.reservation_capacity) == ("cr-1", 3)
    # the node launched into it is labelled with the reservation
    assert offering.requirements.labels()["karpenter.kwok.sh/reservation-id"] == "cr-1"
    # and it survives the round trip; other offerings stay in Karpenter's field names
    path.write_text(dump_catalogue(load_catalogue(path)))
    assert json.loads(path.read_text())[0]["offerings"][0]["ReservationCapacity"] == 3


def test_a_reserved_offering_without_its_reservation_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "types.json"
    path.write_text(_reserved_entry("unbooked", ReservationCapacity=3))
    with pytest.raises(CatalogueError, match=r"entry unbooked.*reservation-id"):
        load_catalogue(path)


def _gpu_entry(slices: list[dict[str, object]]) -> dict[str, object]:
    return {
        "name": "g-8x-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
        "resources": {"cpu": "8", "memory": "32Gi"},
        "offerings": [{"Price": 1.0, "Available": True, "Requirements": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-a"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}],
        "resourceSlices": slices,
    }


def test_catalogue_entry_declares_devices_as_slice_templates(tmp_path: Path) -> None:
    """dra-kwok-driver's DRAConfig analogue: devices per instance type, in the
    ResourceSlice spec's shape, become the type's resource_slice_templates."""

    path = tmp_path / "types.json"
    path.write_text(json.dumps([_gpu_entry([{
        "driver": "gpu.example.com",
        "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "A100"}},
                     "capacity": {"memory": {"value": "80Gi"}}} for i in range(4)],
    }])]))
    (it,) = to_instance_types(load_catalogue(path))
    (template,) = it.resource_slice_templates
    assert (template.driver, template.pool) == ("gpu.example.com", "g-8x-amd64-linux")
    assert [d.id.name for d in template.devices] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert template.devices[0].capacity["memory"] == 80 * 2**30


def test_catalogue_device_without_a_name_is_refused_naming_the_type(tmp_path: Path) -> None:

    path = tmp_path / "types.json"
    path.write_text(json.dumps([_gpu_entry([{"driver": "gpu.example.com",
                                             "devices": [{"attributes": {}}]}])]))
    with pytest.raises(CatalogueError, match=r"instance type g-8x-amd64-linux: .*name"):
        to_instance_types(load_catalogue(path))
