"""The CloudProvider protocol, its errors, the plugin registry (entry-point group
``karpy.cloudproviders``), the kwok provider and a conformance kit for provider authors."""
