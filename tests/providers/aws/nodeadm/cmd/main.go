// Command karpy-nodeadm-validate checks user data the way the EKS node agent (nodeadm)
// checks it at boot, so karpy's tests refuse a NodeConfig a real node would refuse.
//
// It reads user data (a plain NodeConfig YAML/JSON document, or a MIME multi-part
// archive) from the file named by its argument, or from stdin, and:
//
//  1. parses it with nodeadm's own config provider code (MIME parts of type
//     application/node.eks.aws decoded and merged in order, as `nodeadm init` does);
//  2. runs nodeadm's ValidateNodeConfig (cluster name, apiServerEndpoint,
//     certificateAuthority and cidr are required);
//  3. decodes every NodeConfig document strictly against nodeadm's v1alpha1 API, and
//     its spec.kubelet.config strictly against KubeletConfiguration v1beta1. nodeadm
//     itself ignores unknown fields; karpy's tests do not, because an ignored field is
//     a setting that silently never reaches the node.
//
// It exits 0 when all pass; otherwise it prints the first error to stderr, prefixed by
// the stage that failed ("parse:", "validate:", "strict:"), and exits 1.
//
// build.sh compiles this file inside a scratch copy of the nodeadm module (the
// validation lives in an internal package); it is karpy's code, not nodeadm's.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/awslabs/amazon-eks-ami/nodeadm/api/v1alpha1"
	"github.com/awslabs/amazon-eks-ami/nodeadm/internal/api"
	"github.com/awslabs/amazon-eks-ami/nodeadm/internal/configprovider"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

func fail(stage string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", stage, err)
	os.Exit(1)
}

func main() {
	var data []byte
	var err error
	if len(os.Args) > 1 {
		data, err = os.ReadFile(os.Args[1])
	} else {
		data, err = io.ReadAll(os.Stdin)
	}
	if err != nil {
		fail("read", err)
	}
	config, err := configprovider.ParseUserData(data)
	if err != nil {
		fail("parse", err)
	}
	if err := api.ValidateNodeConfig(config); err != nil {
		fail("validate", err)
	}
	docs, err := configprovider.NodeConfigDocuments(data)
	if err != nil {
		fail("parse", err)
	}
	for i, doc := range docs {
		var typed v1alpha1.NodeConfig
		if err := yaml.UnmarshalStrict(doc, &typed); err != nil {
			fail("strict", fmt.Errorf("NodeConfig document %d: %w", i+1, err))
		}
		if len(typed.Spec.Kubelet.Config) == 0 {
			continue
		}
		raw, err := json.Marshal(typed.Spec.Kubelet.Config)
		if err != nil {
			fail("strict", err)
		}
		decoder := json.NewDecoder(bytes.NewReader(raw))
		decoder.DisallowUnknownFields()
		var kubelet kubeletv1beta1.KubeletConfiguration
		if err := decoder.Decode(&kubelet); err != nil {
			fail("strict", fmt.Errorf("NodeConfig document %d: spec.kubelet.config: %w", i+1, err))
		}
	}
}
