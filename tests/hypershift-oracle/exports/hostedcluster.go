// Compiled into HyperShift's package hypershift-operator/controllers/hostedcluster by the oracle's
// build (go build -overlay; never written into the checkout, never part of HyperShift). It only
// gives the oracle access to HyperShift's own unexported functions; it computes nothing itself.
package hostedcluster

import (
	"context"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/openshift/hypershift/support/capabilities"
	"github.com/openshift/hypershift/support/releaseinfo"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

func OracleReconciler(c client.Client, caps capabilities.CapabiltyChecker) *HostedClusterReconciler {
	return &HostedClusterReconciler{Client: c, ManagementClusterCapabilities: caps}
}

func OracleValidateConfigAndClusterCapabilities(ctx context.Context, r *HostedClusterReconciler, hc *hyperv1.HostedCluster) error {
	return r.validateConfigAndClusterCapabilities(ctx, hc)
}

func OracleValidateHostedClusterSupport(r *HostedClusterReconciler, hc *hyperv1.HostedCluster) error {
	return r.validateHostedClusterSupport(hc)
}

func OracleValidateReleaseImage(ctx context.Context, r *HostedClusterReconciler, hc *hyperv1.HostedCluster, p releaseinfo.ProviderWithOpenShiftImageRegistryOverrides) error {
	return r.validateReleaseImage(ctx, hc, p)
}

func OracleIsAutoscalingNeeded(ctx context.Context, r *HostedClusterReconciler, hc *hyperv1.HostedCluster) (bool, error) {
	return r.isAutoscalingNeeded(ctx, hc)
}

// certRenewalAnnotations needs the live KAS serving certificate; the oracle passes none.
func OracleReconcileHostedControlPlane(hcp *hyperv1.HostedControlPlane, hc *hyperv1.HostedCluster, isAutoscalingNeeded bool) error {
	return reconcileHostedControlPlane(hcp, hc, isAutoscalingNeeded, false, func() (map[string]string, error) { return nil, nil })
}

func OracleComputeAzurePLSCondition(list hyperv1.AzurePrivateLinkServiceList, t hyperv1.ConditionType) metav1.Condition {
	return computeAzurePLSCondition(list, t)
}
