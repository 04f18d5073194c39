package main

// providerVersion is the github.com/aws/karpenter-provider-aws version go.mod pins (printed
// in the output).
const providerVersion = "v1.14.1"
