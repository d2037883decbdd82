package main

// cbor is -cbor: measure what the operator's writes would cost the API
// server with CBOR bodies instead of JSON ones. kube-apiserver v1.37.1
// parses every application/apply-patch+yaml body with its YAML parser,
// JSON or not (docs/benchmarks.md has the profile); CBOR apply bodies skip
// that, but both sides' gates are alpha and off by default, so the
// operator never turns them on itself.
var cbor bool

// apiserverFeatureGates is the benchmark cluster's kube-apiserver
// --feature-gates. hack/local-cluster.sh recreates a cluster made with
// other ones.
func apiserverFeatureGates() string {
	if cbor {
		return "CBORServingAndStorage=true"
	}
	return ""
}

// operatorEnv is the environment the operator subprocess gets beyond the
// benchmark's own: client-go reads its feature gates from KUBE_FEATURE_*
// variables.
func operatorEnv() []string {
	if cbor {
		return []string{"KUBE_FEATURE_ClientsAllowCBOR=true", "KUBE_FEATURE_ClientsPreferCBOR=true"}
	}
	return nil
}
