// This file is karpy's, not nodeadm's: build.sh copies it into nodeadm's
// internal/configprovider package (in a scratch copy of the module) so that the
// validator reads user data with nodeadm's own, unexported, MIME handling.

package configprovider

import (
	"io"
	"mime"

	internalapi "github.com/awslabs/amazon-eks-ami/nodeadm/internal/api"
	apibridge "github.com/awslabs/amazon-eks-ami/nodeadm/internal/api/bridge"
)

// ParseUserData is what userDataConfigProvider.Provide does with the bytes IMDS
// returns: a MIME multi-part archive has its NodeConfig parts decoded and merged in
// order; anything else is decoded whole as one NodeConfig.
func ParseUserData(userData []byte) (*internalapi.NodeConfig, error) {
	if reader, err := getMIMEMultipartReader(userData); err == nil {
		return parseMultipart(reader)
	}
	return apibridge.DecodeNodeConfig(userData)
}

// NodeConfigDocuments returns the raw NodeConfig documents ParseUserData decodes
// (the application/node.eks.aws parts, or the whole user data), so the validator can
// also decode each one strictly.
func NodeConfigDocuments(userData []byte) ([][]byte, error) {
	reader, err := getMIMEMultipartReader(userData)
	if err != nil {
		return [][]byte{userData}, nil
	}
	var docs [][]byte
	for {
		part, err := reader.NextPart()
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		header := part.Header.Get(contentTypeHeader)
		if header == "" {
			continue
		}
		mediaType, _, err := mime.ParseMediaType(header)
		if err != nil {
			return nil, err
		}
		if mediaType != nodeConfigMediaType {
			continue
		}
		doc, err := io.ReadAll(part)
		if err != nil {
			return nil, err
		}
		docs = append(docs, doc)
	}
}
