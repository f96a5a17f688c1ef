// Package k8scheck checks the Kubernetes recipes of configs/k8s as the API server and
// Helm would read them: every manifest decoded strictly into the k8s.io/api types, the
// references inside a manifest resolved (volumes mounted exist, probe ports are container
// ports, selectors match template labels), the image's user admitted by runAsNonRoot, and
// the Zero to JupyterHub values validated against the chart's values schema. A module of
// its own, so that the main module does not depend on k8s.io/api; its tests are the
// check (.ci/run: cd scripts/k8scheck && go test ./...).
package k8scheck
