package main

// providerVersion is the github.com/Azure/karpenter-provider-azure version go.mod pins
// (printed in the output).
const providerVersion = "v1.14.2"
