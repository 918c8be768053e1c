// Compiled into HyperShift's package hypershift-operator/controllers/nodepool by the oracle's build
// (go build -overlay; never written into the checkout, never part of HyperShift). It only gives the
// oracle access to HyperShift's own unexported functions and fields.
package nodepool

import (
	"context"
	"encoding/json"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/openshift/hypershift/support/releaseinfo"
	"github.com/openshift/hypershift/support/upsert"
	supportutil "github.com/openshift/hypershift/support/util"

	"k8s.io/client-go/tools/record"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	OracleAnnotationCurrentConfig           = nodePoolAnnotationCurrentConfig
	OracleAnnotationPlatformMachineTemplate = nodePoolAnnotationPlatformMachineTemplate
)

func OracleReconciler(c client.Client, rp releaseinfo.Provider, imp supportutil.ImageMetadataProvider) *NodePoolReconciler {
	return &NodePoolReconciler{
		Client:                 c,
		recorder:               record.NewFakeRecorder(10000),
		ReleaseProvider:        rp,
		CreateOrUpdateProvider: upsert.New(false),
		ImageMetadataProvider:  imp,
	}
}

func OracleIsUpdatingVersion(np *hyperv1.NodePool, target string) bool {
	return isUpdatingVersion(np, target)
}

func OracleIsUpdatingMachineTemplate(np *hyperv1.NodePool, target string) bool {
	return isUpdatingMachineTemplate(np, target)
}

// The Azure branch of CAPI.machineTemplateBuilders: defaultAzureNodePoolImage,
// azureMachineTemplateSpec, and the template name from json.Marshal(spec) as templateNameGenerator does.
func OracleAzureMachineTemplateName(hc *hyperv1.HostedCluster, np *hyperv1.NodePool, ri *releaseinfo.ReleaseImage) (string, any, error) {
	np = np.DeepCopy()
	if err := defaultAzureNodePoolImage(np, ri); err != nil {
		return "", nil, err
	}
	var acr string
	if hc != nil && hc.Spec.Platform.Azure != nil {
		acr = string(hc.Spec.Platform.Azure.ContainerRegistry.Credentials.ManagedIdentity.ResourceID)
	}
	spec, err := azureMachineTemplateSpec(np, acr)
	if err != nil {
		return "", nil, err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return "", nil, err
	}
	return generateMachineTemplateName(np, b), spec, nil
}

// OracleConditionFunction is one of reconcile()'s condition functions and its name.
type OracleConditionFunction struct {
	Name string
	Fn   func(ctx context.Context, nodePool *hyperv1.NodePool, hcluster *hyperv1.HostedCluster) (*ctrl.Result, error)
}

// OracleConditionFunctions: reconcile()'s condition functions, by name, in its order, so that each
// can be judged on its own even where the whole reconcile short-circuits before it.
func OracleConditionFunctions(r *NodePoolReconciler) []OracleConditionFunction {
	return []OracleConditionFunction{
		{"autoscalerEnabledCondition", r.autoscalerEnabledCondition},
		{"updateManagementEnabledCondition", r.updateManagementEnabledCondition},
		{"releaseImageCondition", r.releaseImageCondition},
		{"ignitionEndpointAvailableCondition", r.ignitionEndpointAvailableCondition},
		{"validArchPlatformCondition", r.validArchPlatformCondition},
		{"reconciliationActiveCondition", r.reconciliationActiveCondition},
		{"supportedVersionSkewCondition", r.supportedVersionSkewCondition},
		{"validMachineConfigCondition", r.validMachineConfigCondition},
		{"updatingConfigCondition", r.updatingConfigCondition},
		{"updatingVersionCondition", r.updatingVersionCondition},
		{"validGeneratedPayloadCondition", r.validGeneratedPayloadCondition},
		{"reachedIgnitionEndpointCondition", r.reachedIgnitionEndpointCondition},
		{"validPlatformConfigCondition", r.validPlatformConfigCondition},
	}
}
