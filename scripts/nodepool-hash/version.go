package main

// karpenterVersion is the sigs.k8s.io/karpenter version go.mod pins (printed in the output).
const karpenterVersion = "v1.14.1"
