package awsemu

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// This file answers EKS's REST-JSON protocol for the one call Fleetwright makes:
// DescribeCluster (GET /clusters/{name}), which the launcher reads the cluster's service CIDR
// from (kubernetesNetworkConfig.serviceIpv4Cidr, or serviceIpv6Cidr on an IPv6 cluster), as
// Karpenter does: AL2023's nodeadm derives the cluster DNS address from it. The emulated
// account holds one cluster, Config.ClusterName. Requests are told from EC2's by the service
// of their SigV4 credential scope ("eks").

// eksCluster is the part of DescribeCluster's cluster that clients read.
type eksCluster struct {
	Name                    string            `json:"name"`
	Arn                     string            `json:"arn"`
	CreatedAt               float64           `json:"createdAt"`
	Version                 string            `json:"version"`
	Endpoint                string            `json:"endpoint"`
	Status                  string            `json:"status"`
	PlatformVersion         string            `json:"platformVersion"`
	CertificateAuthority    map[string]string `json:"certificateAuthority"`
	KubernetesNetworkConfig map[string]string `json:"kubernetesNetworkConfig"`
	ResourcesVpcConfig      map[string]any    `json:"resourcesVpcConfig"`
}

// serveEKS answers GET /clusters/{name}; anything else is an unknown operation.
func (e *Emulator) serveEKS(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/clusters/")
	if r.Method != http.MethodGet || !ok || name == "" || strings.Contains(name, "/") {
		e.record(Call{Service: "eks", Action: r.Method + " " + r.URL.Path, ErrorCode: "UnknownOperationException"})
		writeEKSError(w, &apiError{Status: 404, Code: "UnknownOperationException", Message: "the emulator answers only DescribeCluster (GET /clusters/{name})"})
		return
	}
	if n, err := url.PathUnescape(name); err == nil {
		name = n
	}
	if e.throttled("eks", "DescribeCluster") {
		e.record(Call{Service: "eks", Action: "DescribeCluster", ErrorCode: "ThrottlingException", Throttled: true})
		writeEKSError(w, &apiError{Status: 429, Code: "ThrottlingException", Message: "Rate exceeded"})
		return
	}
	if name != e.cfg.ClusterName {
		e.record(Call{Service: "eks", Action: "DescribeCluster", ErrorCode: "ResourceNotFoundException"})
		writeEKSError(w, &apiError{Status: 404, Code: "ResourceNotFoundException", Message: fmt.Sprintf("No cluster found for name: %s.", name)})
		return
	}
	e.record(Call{Service: "eks", Action: "DescribeCluster"})
	network := map[string]string{"ipFamily": "ipv4", "serviceIpv4Cidr": e.cfg.ServiceCIDR}
	if strings.Contains(e.cfg.ServiceCIDR, ":") {
		network = map[string]string{"ipFamily": "ipv6", "serviceIpv6Cidr": e.cfg.ServiceCIDR}
	}
	endpoint := e.cfg.ClusterEndpoint
	if endpoint == "" {
		endpoint = fmt.Sprintf("https://%X.gr7.%s.eks.amazonaws.com", e.cfg.Seed, e.cfg.Region)
	}
	out := struct {
		Cluster eksCluster `json:"cluster"`
	}{eksCluster{
		Name: name, Arn: fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", e.cfg.Region, e.cfg.AccountID, name),
		CreatedAt: float64(e.cfg.Clock.Now().Add(-24 * time.Hour).Unix()), Version: "1.32", Endpoint: endpoint, Status: "ACTIVE",
		PlatformVersion:         "eks.1",
		CertificateAuthority:    map[string]string{"data": base64.StdEncoding.EncodeToString([]byte("emulated certificate authority"))},
		KubernetesNetworkConfig: network,
		ResourcesVpcConfig:      map[string]any{"vpcId": e.world.vpcID, "endpointPublicAccess": true, "endpointPrivateAccess": true},
	}}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// writeEKSError writes an error as the REST-JSON protocol does: the code in x-amzn-ErrorType.
func writeEKSError(w http.ResponseWriter, ae *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-ErrorType", ae.Code)
	w.WriteHeader(ae.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": ae.Message})
}
