"""The AKSNodeClass CRD serves v1alpha2 beside v1beta1 (stored), with one schema, so
manifests written for either version apply unchanged."""

from __future__ import annotations

import yaml
from karpy_azure.apis import EXTENSION, AKSNodeClass

from karpy.apis.crdgen import generate
from karpy.apis.extension import CORE


def test_v1beta1_is_stored_and_v1alpha2_served_with_the_same_schema() -> None:
    crds = generate([CORE, EXTENSION])
    crd = yaml.safe_load(crds["karpenter.azure.com_aksnodeclasses.yaml"])
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    assert set(versions) == {"v1beta1", "v1alpha2"}
    assert (versions["v1beta1"]["served"], versions["v1beta1"]["storage"]) == (True, True)
    assert (versions["v1alpha2"]["served"], versions["v1alpha2"]["storage"]) == (True, False)
    assert versions["v1alpha2"]["schema"] == versions["v1beta1"]["schema"]
    assert versions["v1alpha2"]["subresources"] == {"status": {}}
    assert AKSNodeClass.crd.version == "v1beta1"
