// hcp-oracle: runs HyperShift's own code (the checkout it is built in, release-4.22) on the objects
// hcp-workflow rendered, and prints one JSON document of what HyperShift's code says about them.
//
// Usage: hcp-oracle INPUT.json   (or - for stdin)
//
// Input: {"hostedCluster":{...}, "nodePools":[...], "secrets":[...], "services":[...],
//
//	"azurePrivateLinkServices":[...], "hostedControlPlane":{...} (optional),
//	"releases":{"<image>":"<version>"}, "management":{"capabilities":["Route"]},
//	"previous":{"hostedCluster":{...},"nodePools":[...]} (optional)}
//
// Nothing here re-implements HyperShift: every judgment is a call into HyperShift's packages (or
// into the small export shims compiled into them, which only re-export unexported functions).
// Where HyperShift's code needs something only a live cluster has, the check says not_judged and
// why.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/docker/distribution"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	cpoplsvc "github.com/openshift/hypershift/control-plane-operator/controllers/azureprivatelinkservice"
	"github.com/openshift/hypershift/control-plane-operator/controllers/hostedcontrolplane/infra"
	"github.com/openshift/hypershift/control-plane-operator/controllers/hostedcontrolplane/kas"
	"github.com/openshift/hypershift/hypershift-operator/controllers/hostedcluster"
	"github.com/openshift/hypershift/hypershift-operator/controllers/manifests"
	"github.com/openshift/hypershift/hypershift-operator/controllers/nodepool"
	"github.com/openshift/hypershift/hypershift-operator/controllers/sharedingress"
	hyperapi "github.com/openshift/hypershift/support/api"
	"github.com/openshift/hypershift/support/capabilities"
	"github.com/openshift/hypershift/support/config"
	"github.com/openshift/hypershift/support/releaseinfo"
	fakerelease "github.com/openshift/hypershift/support/releaseinfo/fake"
	"github.com/openshift/hypershift/support/thirdparty/library-go/pkg/image/dockerv1client"
	"github.com/openshift/hypershift/support/thirdparty/library-go/pkg/image/reference"
	"github.com/openshift/hypershift/support/upsert"
	supportutil "github.com/openshift/hypershift/support/util"

	"github.com/opencontainers/go-digest"

	routev1 "github.com/openshift/api/route/v1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Set with -ldflags by build.sh.
var (
	hypershiftCommit = "unknown"
	hypershiftBranch = "unknown"
	oracleSourceHash = "unknown"
	hypershiftSrc    = ""
)

type Input struct {
	HostedCluster            json.RawMessage   `json:"hostedCluster"`
	NodePools                []json.RawMessage `json:"nodePools"`
	Secrets                  []json.RawMessage `json:"secrets"`
	Services                 []json.RawMessage `json:"services"`
	AzurePrivateLinkServices []json.RawMessage `json:"azurePrivateLinkServices"`
	HostedControlPlane       json.RawMessage   `json:"hostedControlPlane"`
	Releases                 map[string]string `json:"releases"`
	Management               struct {
		Capabilities []string `json:"capabilities"`
		// The HyperShift operator's MANAGED_SERVICE env ("ARO-HCP" on an ARO HCP install).
		ManagedService string `json:"managedService"`
	} `json:"management"`
	Previous *struct {
		HostedCluster json.RawMessage   `json:"hostedCluster"`
		NodePools     []json.RawMessage `json:"nodePools"`
	} `json:"previous"`
}

type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type Panic struct {
	Function string `json:"function"`
	Value    string `json:"value"`
	Stack    string `json:"stack"`
}

type Check struct {
	Check    string         `json:"check"`
	Subject  string         `json:"subject,omitempty"`
	Function string         `json:"hypershift_function"`
	Result   string         `json:"result"`
	Judged   string         `json:"judged_by"`
	Conds    []Condition    `json:"conditions"`
	Objects  []any          `json:"objects"`
	Errors   []string       `json:"errors"`
	Panic    *Panic         `json:"panic"`
	Reason   string         `json:"reason"`
	Values   map[string]any `json:"values,omitempty"`
}

type Output struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	HyperShift struct {
		Commit string `json:"commit"`
		Branch string `json:"branch"`
	} `json:"hypershift"`
	OracleSourceHash string  `json:"oracleSourceHash"`
	Checks           []Check `json:"checks"`
	Summary          struct {
		OK        int `json:"ok"`
		Failed    int `json:"failed"`
		Panic     int `json:"panic"`
		NotJudged int `json:"not_judged"`
	} `json:"summary"`
}

var out Output

func newCheck(name, fn, judged string) *Check {
	return &Check{Check: name, Function: fn, Judged: judged, Result: "ok", Conds: []Condition{}, Objects: []any{}, Errors: []string{}}
}

func add(c *Check) { out.Checks = append(out.Checks, *c) }

func (c *Check) fail(format string, a ...any) {
	c.Errors = append(c.Errors, fmt.Sprintf(format, a...))
	if c.Result == "ok" {
		c.Result = "failed"
	}
}

func (c *Check) notJudged(reason string) {
	if c.Result == "ok" {
		c.Result = "not_judged"
	}
	if c.Reason == "" {
		c.Reason = reason
	} else {
		c.Reason += "; " + reason
	}
}

func (c *Check) value(k string, v any) {
	if c.Values == nil {
		c.Values = map[string]any{}
	}
	c.Values[k] = v
}

// guard runs f; a panic in it becomes the check's result, naming the innermost HyperShift function
// on the panicking goroutine's stack.
func guard(c *Check, f func()) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		c.Result = "panic"
		c.Panic = &Panic{Function: panicFunction(), Value: fmt.Sprint(r), Stack: string(debug.Stack())}
		c.Errors = append(c.Errors, fmt.Sprintf("panic in %s: %v", c.Panic.Function, r))
	}()
	f()
}

func panicFunction() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		fr, more := frames.Next()
		if strings.HasPrefix(fr.Function, "github.com/openshift/hypershift/") &&
			!strings.Contains(fr.Function, "zz_hcp_oracle") && !strings.Contains(fr.Function, ".Oracle") &&
			!strings.HasPrefix(fr.Function, "main.") {
			file := fr.File
			if hypershiftSrc != "" {
				file = strings.TrimPrefix(file, hypershiftSrc+"/")
			}
			return fmt.Sprintf("%s (%s:%d)", strings.TrimPrefix(fr.Function, "github.com/openshift/hypershift/"), file, fr.Line)
		}
		if !more {
			return "unknown"
		}
	}
}

// logBuf holds HyperShift's log lines (zap JSON) since the last Reset.
var logBuf bytes.Buffer

// logMessages: the messages (and errors) HyperShift logged since the last logBuf.Reset, in order.
func logMessages() []string {
	out := []string{}
	for _, line := range strings.Split(logBuf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		msg := fmt.Sprint(m["msg"])
		if e, ok := m["error"]; ok {
			msg += ": " + fmt.Sprint(e)
		}
		if len(out) == 0 || out[len(out)-1] != msg {
			out = append(out, msg)
		}
	}
	return out
}

// --- registry stand-ins -----------------------------------------------------------------------

var errNeedsRegistry = errors.New("not judged: needs the release image's registry (a live cluster's)")

// noRegistry answers every image-metadata question with errNeedsRegistry: the oracle has no
// registry and never invents image metadata.
type noRegistry struct{}

func (noRegistry) ImageMetadata(context.Context, string, []byte) (*dockerv1client.DockerImageConfig, error) {
	return nil, errNeedsRegistry
}
func (noRegistry) GetManifest(context.Context, string, []byte) (distribution.Manifest, error) {
	return nil, errNeedsRegistry
}
func (noRegistry) GetDigest(context.Context, string, []byte) (digest.Digest, *reference.DockerImageReference, error) {
	return "", nil, errNeedsRegistry
}
func (noRegistry) GetMetadata(context.Context, string, []byte) (*dockerv1client.DockerImageConfig, []distribution.Descriptor, distribution.BlobStore, error) {
	return nil, nil, nil, errNeedsRegistry
}
func (noRegistry) GetOverride(context.Context, string, []byte) (*reference.DockerImageReference, error) {
	return nil, errNeedsRegistry
}

// releases: HyperShift's own fake release provider (support/releaseinfo/fake), answering only for
// the images whose version the input states (what the simulator's registry reports); any other
// image is "unable to lookup release image".
func releases(in *Input) *fakerelease.FakeReleaseProvider {
	m := map[string]string{}
	for k, v := range in.Releases {
		m[k] = v
	}
	if len(m) == 0 {
		m["<none>"] = "<none>"
	}
	return &fakerelease.FakeReleaseProvider{ImageVersion: m}
}

// --- decoding ---------------------------------------------------------------------------------

func decodeInto(c *Check, what string, raw json.RawMessage, obj any) bool {
	if len(raw) == 0 || string(raw) == "null" {
		return false
	}
	if err := json.Unmarshal(raw, obj); err != nil {
		c.fail("%s does not decode into HyperShift's Go type: %v", what, err)
		return false
	}
	return true
}

// mgmtAppsDomain is the management cluster's default ingress domain, the simulator's
// (simulator/src/operator.rs MANAGEMENT_APPS_DOMAIN).
const mgmtAppsDomain = "apps.management.example.com"

// decodeAll decodes each of raws into a new T; the ones that do not decode are failures of c,
// named `what[i]`, and are left out.
func decodeAll[T any](c *Check, what string, raws []json.RawMessage) []*T {
	var out []*T
	for i, r := range raws {
		obj := new(T)
		if decodeInto(c, fmt.Sprintf("%s[%d]", what, i), r, obj) {
			out = append(out, obj)
		}
	}
	return out
}

type objects struct {
	hc       *hyperv1.HostedCluster
	nps      []*hyperv1.NodePool
	secrets  []*corev1.Secret
	services []*corev1.Service
	pls      []*hyperv1.AzurePrivateLinkService
	hcp      *hyperv1.HostedControlPlane
	prevHC   *hyperv1.HostedCluster
	prevNPs  []*hyperv1.NodePool
}

func decode(in *Input) *objects {
	c := newCheck("decode", "api/hypershift/v1beta1 types (HostedCluster, NodePool, AzurePrivateLinkService, HostedControlPlane), k8s core/v1", "encoding/json into HyperShift's API types")
	o := &objects{}
	hc := &hyperv1.HostedCluster{}
	if decodeInto(c, "hostedCluster", in.HostedCluster, hc) {
		o.hc = hc
	} else if c.Result == "ok" {
		c.fail("no hostedCluster in the input")
	}
	o.nps = decodeAll[hyperv1.NodePool](c, "nodePools", in.NodePools)
	o.secrets = decodeAll[corev1.Secret](c, "secrets", in.Secrets)
	o.services = decodeAll[corev1.Service](c, "services", in.Services)
	o.pls = decodeAll[hyperv1.AzurePrivateLinkService](c, "azurePrivateLinkServices", in.AzurePrivateLinkServices)
	hcp := &hyperv1.HostedControlPlane{}
	if decodeInto(c, "hostedControlPlane", in.HostedControlPlane, hcp) {
		o.hcp = hcp
	}
	if in.Previous != nil {
		p := &hyperv1.HostedCluster{}
		if decodeInto(c, "previous.hostedCluster", in.Previous.HostedCluster, p) {
			o.prevHC = p
		}
		o.prevNPs = decodeAll[hyperv1.NodePool](c, "previous.nodePools", in.Previous.NodePools)
	}
	c.value("hostedCluster", o.hc != nil)
	c.value("nodePools", len(o.nps))
	c.value("secrets", len(o.secrets))
	c.value("services", len(o.services))
	add(c)
	return o
}

func clean(obj client.Object) client.Object {
	obj.SetResourceVersion("")
	obj.SetManagedFields(nil)
	return obj
}

func fakeClient(objs ...client.Object) client.WithWatch {
	b := fake.NewClientBuilder().WithScheme(hyperapi.Scheme)
	for _, o := range objs {
		if o == nil {
			continue
		}
		b = b.WithObjects(clean(o.DeepCopyObject().(client.Object)))
	}
	return b.WithStatusSubresource(&hyperv1.HostedCluster{}, &hyperv1.NodePool{}, &hyperv1.HostedControlPlane{}, &hyperv1.AzurePrivateLinkService{}, &corev1.Service{}).Build()
}

func (o *objects) all() []client.Object {
	var objs []client.Object
	if o.hc != nil {
		objs = append(objs, o.hc)
	}
	for _, x := range o.nps {
		objs = append(objs, x)
	}
	for _, x := range o.secrets {
		objs = append(objs, x)
	}
	for _, x := range o.services {
		objs = append(objs, x)
	}
	return objs
}

func metav1OwnerRef(h *hyperv1.HostedControlPlane) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: hyperv1.GroupVersion.String(), Kind: "HostedControlPlane", Name: h.Name, UID: h.UID, Controller: ptr.To(true)}
}

// --- HostedCluster ------------------------------------------------------------------------------

type capSet map[string]bool

func (s capSet) Has(cs ...capabilities.CapabilityType) bool {
	names := map[capabilities.CapabilityType]string{
		capabilities.CapabilityRoute:                     "Route",
		capabilities.CapabilitySecurityContextConstraint: "SecurityContextConstraint",
		capabilities.CapabilityImage:                     "Image",
		capabilities.CapabilityInfrastructure:            "Infrastructure",
		capabilities.CapabilityIngress:                   "Ingress",
		capabilities.CapabilityProxy:                     "Proxy",
		capabilities.CapabilityDNS:                       "DNS",
	}
	for _, c := range cs {
		if !s[names[c]] {
			return false
		}
	}
	return true
}

func judgeHostedCluster(ctx context.Context, in *Input, o *objects) {
	caps := capSet{}
	for _, c := range in.Management.Capabilities {
		caps[c] = true
	}
	hc := o.hc.DeepCopy()
	cl := fakeClient(o.all()...)
	r := hostedcluster.OracleReconciler(cl, caps)

	c := newCheck("hostedcluster.ValidConfiguration", "hypershift-operator/controllers/hostedcluster validateConfigAndClusterCapabilities", "the function reconcile() calls for the ValidConfiguration condition, with the condition built as reconcile() builds it (not the whole reconciler: it needs a live management cluster)")
	c.value("managementCapabilities", in.Management.Capabilities)
	guard(c, func() {
		if err := hostedcluster.OracleValidateConfigAndClusterCapabilities(ctx, r, hc); err != nil {
			c.Conds = append(c.Conds, Condition{string(hyperv1.ValidHostedClusterConfiguration), "False", hyperv1.InvalidConfigurationReason, err.Error()})
			c.fail("ValidConfiguration=False: %v", err)
		} else {
			c.Conds = append(c.Conds, Condition{string(hyperv1.ValidHostedClusterConfiguration), "True", hyperv1.AsExpectedReason, "Configuration passes validation"})
		}
	})
	add(c)

	c = newCheck("hostedcluster.SupportedHostedCluster", "hypershift-operator/controllers/hostedcluster validateHostedClusterSupport", "the function reconcile() calls for the SupportedHostedCluster condition")
	guard(c, func() {
		if err := hostedcluster.OracleValidateHostedClusterSupport(r, hc); err != nil {
			c.Conds = append(c.Conds, Condition{string(hyperv1.SupportedHostedCluster), "False", hyperv1.UnsupportedHostedClusterReason, err.Error()})
			c.fail("SupportedHostedCluster=False: %v", err)
		} else {
			c.Conds = append(c.Conds, Condition{string(hyperv1.SupportedHostedCluster), "True", hyperv1.AsExpectedReason, "HostedCluster is supported by operator configuration"})
		}
	})
	add(c)

	c = newCheck("hostedcluster.ValidReleaseImage", "hypershift-operator/controllers/hostedcluster validateReleaseImage (supportedversion.IsValidReleaseVersion)", "the function reconcile() calls for the ValidReleaseImage condition, with HyperShift's fake release provider answering the versions the input states")
	img := supportutil.HCControlPlaneReleaseImage(hc)
	c.value("releaseImage", img)
	if _, ok := in.Releases[img]; !ok {
		c.notJudged(fmt.Sprintf("the version of %s is not in the input (it is the registry's answer)", img))
	} else {
		guard(c, func() {
			err := hostedcluster.OracleValidateReleaseImage(ctx, r, hc, releases(in))
			if err != nil {
				reason := hyperv1.InvalidImageReason
				if strings.Contains(err.Error(), "not found") {
					reason = hyperv1.SecretNotFoundReason
				}
				c.Conds = append(c.Conds, Condition{string(hyperv1.ValidReleaseImage), "False", reason, err.Error()})
				c.fail("ValidReleaseImage=False: %v", err)
			} else {
				c.Conds = append(c.Conds, Condition{string(hyperv1.ValidReleaseImage), "True", hyperv1.AsExpectedReason, "Release image is valid"})
			}
		})
	}
	add(c)

	c = newCheck("hostedcluster.AzurePLSConditions", "hypershift-operator/controllers/hostedcluster computeAzurePLSCondition", "the function reconcile() sets the HostedCluster's five Azure private-link conditions with, on the input's AzurePrivateLinkService CRs")
	switch {
	case hc.Spec.Platform.Type != hyperv1.AzurePlatform:
		c.notJudged("not Azure")
	case len(o.pls) == 0:
		c.notJudged("no AzurePrivateLinkService in the control-plane namespace: reconcile() sets none of these conditions")
	default:
		guard(c, func() {
			list := hyperv1.AzurePrivateLinkServiceList{}
			for _, p := range o.pls {
				list.Items = append(list.Items, *p)
			}
			for _, t := range []hyperv1.ConditionType{hyperv1.AzurePrivateLinkServiceAvailable, hyperv1.AzurePLSCreated, hyperv1.AzureInternalLoadBalancerAvailable, hyperv1.AzurePrivateEndpointAvailable, hyperv1.AzurePrivateDNSAvailable} {
				cd := hostedcluster.OracleComputeAzurePLSCondition(list, t)
				c.Conds = append(c.Conds, Condition{cd.Type, string(cd.Status), cd.Reason, cd.Message})
			}
		})
	}
	add(c)

	c = newCheck("hostedcluster.HostedControlPlane", "hypershift-operator/controllers/hostedcluster reconcileHostedControlPlane", "the function the HostedCluster reconciler renders the HostedControlPlane with (cert-renewal annotations, which need the live KAS, left out)")
	hcp := &hyperv1.HostedControlPlane{}
	hcp.Namespace = manifests.HostedControlPlaneNamespace(hc.Namespace, hc.Name)
	hcp.Name = hc.Name
	guard(c, func() {
		auto, err := hostedcluster.OracleIsAutoscalingNeeded(ctx, r, hc)
		if err != nil {
			c.fail("isAutoscalingNeeded: %v", err)
		}
		if err := hostedcluster.OracleReconcileHostedControlPlane(hcp, hc, auto); err != nil {
			c.fail("reconcileHostedControlPlane: %v", err)
			return
		}
		hcp.APIVersion = hyperv1.GroupVersion.String()
		hcp.Kind = "HostedControlPlane"
		c.Objects = append(c.Objects, hcp)
		if o.hcp == nil {
			o.hcp = hcp
			c.value("usedForLaterChecks", true)
		} else {
			c.value("usedForLaterChecks", false)
		}
	})
	add(c)
}

// --- control plane: KAS publishing, infra, shared ingress --------------------------------------

func svcByName(o *objects, ns, name string) *corev1.Service {
	for _, s := range o.services {
		if s.Namespace == ns && s.Name == name {
			return s.DeepCopy()
		}
	}
	return nil
}

func judgeControlPlane(ctx context.Context, o *objects) {
	hcp := o.hcp
	if hcp == nil {
		c := newCheck("controlplane", "-", "-")
		c.notJudged("no HostedControlPlane (neither in the input nor rendered)")
		add(c)
		return
	}
	ns := hcp.Namespace
	strategy := supportutil.ServicePublishingStrategyByTypeForHCP(hcp, hyperv1.APIServer)

	// kas.ReconcileServiceStatus on the Service the infra reconciler would hand it.
	c := newCheck("kas.ReconcileServiceStatus", "control-plane-operator/controllers/hostedcontrolplane/kas ReconcileServiceStatus", "the function itself, on the Service from the input that infra.reconcileAPIServerServiceStatus would pass it")
	if strategy == nil {
		c.fail("the HostedControlPlane has no APIServer publishing strategy")
	} else {
		c.value("strategy", strategy)
		var svcName string
		switch {
		case supportutil.UseSharedIngressHCP(hcp) || supportutil.UseSwiftNetworkingHCP(hcp):
			svcName = ""
		case strategy.Type == hyperv1.Route && supportutil.IsPublicHCP(hcp):
			svcName = "router"
		case strategy.Type == hyperv1.Route:
			svcName = "private-router"
		case strategy.Type == hyperv1.LoadBalancer && supportutil.IsPublicHCP(hcp):
			svcName = "kube-apiserver-lb"
		case strategy.Type == hyperv1.LoadBalancer:
			svcName = "kube-apiserver-private"
		default:
			svcName = "kube-apiserver"
		}
		c.value("service", svcName)
		if svcName == "" {
			c.notJudged("shared ingress / Swift: infra.reconcileAPIServerServiceStatus does not call ReconcileServiceStatus (see sharedingress.KasRouteHostname)")
		} else if svc := svcByName(o, ns, svcName); svc == nil {
			c.notJudged(fmt.Sprintf("Service %s/%s is not in the input", ns, svcName))
		} else {
			guard(c, func() {
				apiPort := config.KASSVCPort
				if strategy.Type == hyperv1.LoadBalancer && hcp.Spec.Platform.Type == hyperv1.AzurePlatform {
					apiPort = config.KASSVCLBAzurePort
				}
				host, port, msg, err := kas.ReconcileServiceStatus(svc, strategy, apiPort, noopCollector{})
				c.value("host", host)
				c.value("port", port)
				c.value("message", msg)
				if err != nil {
					c.fail("%v", err)
				} else if msg == "" && host == "" {
					c.fail("ReconcileServiceStatus returned no host for the APIServer (type %s)", strategy.Type)
				}
			})
		}
	}
	add(c)

	// The whole infra status reconciler on the input's Services and the Routes the infra
	// reconciler makes for them (the CPO runs both on every HostedControlPlane reconcile:
	// hostedcontrolplane_controller.go). A Route HyperShift leaves without a host gets
	// `<name>-<namespace>.<domain>` from the management cluster's router, as OpenShift's route
	// host allocation gives it.
	c = newCheck("infra.ReconcileInfrastructureStatus", "control-plane-operator/controllers/hostedcontrolplane/infra Reconciler.ReconcileInfrastructureStatus (reconcileAPIServerServiceStatus, ...)", "the whole infrastructure-status reconciler, fake client holding the input's Services and the Routes Reconciler.ReconcileInfrastructure makes (hosts the router would allocate filled in)")
	objs := []client.Object{hcp}
	for _, s := range o.services {
		objs = append(objs, s)
	}
	cl := fakeClient(objs...)
	guard(c, func() {
		if err := infra.NewReconciler(cl, mgmtAppsDomain).ReconcileInfrastructure(ctx, hcp, upsert.New(false).CreateOrUpdate); err != nil {
			c.value("reconcileInfrastructureError", err.Error())
		}
		routes := &routev1.RouteList{}
		_ = cl.List(ctx, routes, client.InNamespace(ns))
		allocated := []string{}
		for i := range routes.Items {
			rt := routes.Items[i]
			if rt.Spec.Host == "" {
				rt.Spec.Host = fmt.Sprintf("%s-%s.%s", rt.Name, rt.Namespace, mgmtAppsDomain)
				_ = cl.Update(ctx, &rt)
				allocated = append(allocated, rt.Name)
			}
		}
		c.value("routeHostsAllocated", allocated)
		st, err := infra.NewReconciler(cl, mgmtAppsDomain).ReconcileInfrastructureStatus(ctx, hcp)
		c.Objects = append(c.Objects, st)
		c.value("ready", st.IsReady())
		c.value("apiHost", st.APIHost)
		c.value("apiPort", st.APIPort)
		// The InfrastructureReady condition as the CPO's HostedControlPlane reconciler builds it
		// from this status (hostedcontrolplane_controller.go; the HostedCluster copies it).
		switch {
		case err != nil:
			c.Conds = append(c.Conds, Condition{string(hyperv1.InfrastructureReady), "Unknown", hyperv1.InfraStatusFailureReason, err.Error()})
			c.fail("%v", err)
		case st.IsReady():
			c.Conds = append(c.Conds, Condition{string(hyperv1.InfrastructureReady), "True", hyperv1.AsExpectedReason, hyperv1.AllIsWellMessage})
		default:
			msg := "Cluster infrastructure is still provisioning"
			if st.Message != "" {
				msg = st.Message
			}
			c.Conds = append(c.Conds, Condition{string(hyperv1.InfrastructureReady), "False", hyperv1.WaitingOnInfrastructureReadyReason, msg})
		}
		if st.IsReady() && st.APIHost == "" {
			c.fail("infrastructure ready with an empty API host")
		}
	})
	add(c)

	// What the infra reconciler creates (Services, Routes) from the HCP alone.
	c = newCheck("infra.ReconcileInfrastructure", "control-plane-operator/controllers/hostedcontrolplane/infra Reconciler.ReconcileInfrastructure", "the whole infrastructure reconciler on an empty fake control-plane namespace; lists the Services and Routes it creates")
	cl2 := fakeClient(hcp)
	guard(c, func() {
		err := infra.NewReconciler(cl2, mgmtAppsDomain).ReconcileInfrastructure(ctx, hcp, upsert.New(false).CreateOrUpdate)
		if err != nil {
			c.fail("%v", err)
		}
		svcs := &corev1.ServiceList{}
		_ = cl2.List(ctx, svcs, client.InNamespace(ns))
		names := []string{}
		for i := range svcs.Items {
			s := svcs.Items[i]
			names = append(names, s.Name)
			c.Objects = append(c.Objects, map[string]any{"kind": "Service", "name": s.Name, "type": s.Spec.Type, "annotations": s.Annotations})
		}
		routes := &routev1.RouteList{}
		_ = cl2.List(ctx, routes, client.InNamespace(ns))
		rnames := []string{}
		for i := range routes.Items {
			rt := routes.Items[i]
			rnames = append(rnames, rt.Name)
			c.Objects = append(c.Objects, map[string]any{"kind": "Route", "name": rt.Name, "host": rt.Spec.Host, "labels": rt.Labels})
			if rt.Spec.Host == "" {
				c.value("routeWithoutHost", rt.Name)
			}
		}
		sort.Strings(names)
		sort.Strings(rnames)
		c.value("services", names)
		c.value("routes", rnames)
		var missing []string
		for _, n := range names {
			if svcByName(o, ns, n) == nil {
				missing = append(missing, n)
			}
		}
		c.value("servicesNotInInput", missing)
	})
	add(c)

	// Shared ingress (ARO HCP).
	c = newCheck("sharedingress.KasRouteHostname", "support/util IsAroHCPByHC/HCP, UseSharedIngressHC/HCP; hypershift-operator/controllers/sharedingress KasRouteHostname", "the functions themselves")
	guard(c, func() {
		c.value("IsAroHCPByHC", supportutil.IsAroHCPByHC(o.hc))
		c.value("UseSharedIngressHC", supportutil.UseSharedIngressHC(o.hc))
		c.value("IsAroHCPByHCP", supportutil.IsAroHCPByHCP(hcp))
		use := supportutil.UseSharedIngressHCP(hcp)
		c.value("UseSharedIngressHCP", use)
		host := sharedingress.KasRouteHostname(hcp)
		c.value("kasHost", host)
		if use && host == "" {
			c.fail("ARO HCP Public cluster uses the shared ingress, but sharedingress.KasRouteHostname is empty (the APIServer strategy has no Route hostname): the KAS would be published at no host")
		}
		if !use {
			c.value("note", "the shared ingress does not apply to this cluster")
		}
	})
	add(c)
}

type noopCollector struct{}

func (noopCollector) ErrorMessages(resource client.Object) ([]string, error) { return nil, nil }

// --- private link -------------------------------------------------------------------------------

func judgePrivateLink(ctx context.Context, o *objects) {
	hcp := o.hcp
	c := newCheck("azureprivatelinkservice.Observer", "control-plane-operator/controllers/azureprivatelinkservice AzurePrivateLinkServiceObserver.Reconcile", "the whole observer reconciler, fake client holding the input's private-router Service and the HostedControlPlane")
	if hcp == nil || o.hc == nil {
		c.notJudged("no HostedControlPlane")
		add(c)
		return
	}
	ns := hcp.Namespace
	svc := svcByName(o, ns, "private-router")
	if svc == nil {
		c.notJudged(fmt.Sprintf("no Service %s/private-router in the input (nothing for the observer to observe)", ns))
		add(c)
		return
	}
	run := func(h *hyperv1.HostedControlPlane) (*hyperv1.AzurePrivateLinkService, error) {
		h = h.DeepCopy()
		if h.UID == "" {
			h.UID = types.UID("hcp-" + h.Name)
		}
		s := svc.DeepCopy()
		// The CPO's infra reconciler makes the HCP the private-router Service's owner.
		if supportutil.ExtractHostedControlPlaneOwnerName(s.OwnerReferences) == "" {
			s.OwnerReferences = append(s.OwnerReferences, metav1OwnerRef(h))
			c.value("ownerReferenceAdded", "the input's private-router Service has no HostedControlPlane owner reference (the CPO sets one); the oracle added it, else the observer refuses the Service")
		}
		cl := fakeClient(h, s)
		r := &cpoplsvc.AzurePrivateLinkServiceObserver{Client: cl, ControllerName: cpoplsvc.ControllerName("private-router"), ServiceNamespace: ns, ServiceName: "private-router", HCPNamespace: ns, CreateOrUpdateProvider: upsert.New(false)}
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "private-router"}})
		_ = res
		if err != nil {
			return nil, err
		}
		pls := &hyperv1.AzurePrivateLinkService{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "private-router"}, pls); err != nil {
			return nil, fmt.Errorf("observer created no AzurePrivateLinkService: %w (Service annotations %v, LB ingress %v)", err, s.Annotations, s.Status.LoadBalancer.Ingress)
		}
		return pls, nil
	}
	guard(c, func() {
		pls, err := run(hcp)
		if err != nil {
			c.fail("%v", err)
			return
		}
		pls.ManagedFields = nil
		c.Objects = append(c.Objects, pls)
		c.value("spec", pls.Spec)
		// Compare with the AzurePrivateLinkService the simulator holds, if any.
		for _, sim := range o.pls {
			if sim.Namespace == ns && sim.Name == "private-router" {
				a, _ := json.Marshal(pls.Spec)
				b, _ := json.Marshal(sim.Spec)
				var am, bm map[string]any
				_ = json.Unmarshal(a, &am)
				_ = json.Unmarshal(b, &bm)
				for k, v := range am {
					if fmt.Sprint(v) != fmt.Sprint(bm[k]) {
						c.fail("AzurePrivateLinkService spec.%s: HyperShift's observer sets %v, the simulator's CR has %v", k, v, bm[k])
					}
				}
				c.value("comparedWithInput", true)
			}
		}
	})
	c.value("watches", "For(&corev1.Service{}) with a predicate on the private-router Service's name and namespace only (SetupWithManager): a HostedControlPlane change alone does not trigger the observer")
	add(c)
}

// --- NodePools ----------------------------------------------------------------------------------

func npConds(np *hyperv1.NodePool) []Condition {
	out := []Condition{}
	for _, c := range np.Status.Conditions {
		out = append(out, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	return out
}

func liveOnly(err error) (bool, string) {
	s := err.Error()
	switch {
	case errors.Is(err, errNeedsRegistry) || strings.Contains(s, errNeedsRegistry.Error()):
		return true, "the reconcile stopped where it needs the release image's registry: " + s
	case strings.Contains(s, "core ignition config") || strings.Contains(s, "expected") && strings.Contains(s, "core") || strings.Contains(s, "MissingCoreConfig"):
		return true, "the reconcile stopped where it needs the control-plane operator's core ignition ConfigMaps (rendered from the release payload on a live cluster): " + s
	case strings.Contains(s, "kubeconfig"):
		return true, "the reconcile stopped where it needs the hosted cluster's kubeconfig: " + s
	}
	return false, ""
}

func judgeNodePools(ctx context.Context, in *Input, o *objects) {
	for _, np0 := range o.nps {
		c := newCheck("nodepool.Reconcile", "hypershift-operator/controllers/nodepool NodePoolReconciler.Reconcile (conditions in reconcile()'s order)", "the whole NodePool reconciler, controller-runtime's fake client, HyperShift's fake release provider (support/releaseinfo/fake) with the input's versions, no registry")
		c.Subject = np0.Name
		// The NodePool under test without its status conditions: the check reports only what
		// HyperShift's reconcile sets (everything else of its status, e.g. version, stays).
		var objs []client.Object
		for _, x := range o.all() {
			if np, ok := x.(*hyperv1.NodePool); ok && np.Name == np0.Name && np.Namespace == np0.Namespace {
				np = np.DeepCopy()
				np.Status.Conditions = nil
				x = np
			}
			objs = append(objs, x)
		}
		if o.hcp != nil {
			objs = append(objs, o.hcp)
		}
		cl := fakeClient(objs...)
		logBuf.Reset()
		r := nodepool.OracleReconciler(cl, releases(in), noRegistry{})
		guard(c, func() {
			req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: np0.Namespace, Name: np0.Name}}
			_, err := r.Reconcile(ctx, req)
			got := &hyperv1.NodePool{}
			if gerr := cl.Get(ctx, req.NamespacedName, got); gerr != nil {
				c.fail("reading the NodePool back: %v", gerr)
				return
			}
			c.Conds = npConds(got)
			c.value("statusVersion", got.Status.Version)
			msgs := logMessages()
			c.value("log", msgs)
			// Where the reconcile stopped, when a condition function short-circuited it.
			for i := len(msgs) - 1; i >= 0; i-- {
				if m := strings.ToLower(msgs[i]); strings.Contains(m, "waiting") || strings.Contains(m, "failed") {
					c.Reason = "the reconcile stopped at: " + msgs[i] + " (conditions after it are not judged)"
					c.value("stoppedAt", msgs[i])
					break
				}
			}
			if err != nil {
				if live, why := liveOnly(err); live {
					c.Reason = why
					c.value("stoppedAt", err.Error())
				} else {
					c.fail("Reconcile: %v", err)
				}
			}
			for _, cd := range c.Conds {
				switch cd.Type {
				case hyperv1.NodePoolValidReleaseImageConditionType, hyperv1.NodePoolValidPlatformConfigConditionType,
					hyperv1.NodePoolValidMachineConfigConditionType, hyperv1.NodePoolValidArchPlatform,
					hyperv1.NodePoolSupportedVersionSkewConditionType:
					if cd.Status == "False" {
						c.fail("%s=False (%s): %s", cd.Type, cd.Reason, cd.Message)
					}
				}
			}
		})
		add(c)

		// Each condition function on its own (the whole reconcile may stop before some).
		for _, f := range nodepool.OracleConditionFunctions(r) {
			fc := newCheck("nodepool."+f.Name, "hypershift-operator/controllers/nodepool NodePoolReconciler."+f.Name, "the condition function on its own (fresh fake client, the NodePool without its conditions), not the whole reconciler")
			fc.Subject = np0.Name
			cl := fakeClient(objs...)
			rr := nodepool.OracleReconciler(cl, releases(in), noRegistry{})
			np := np0.DeepCopy()
			np.Status.Conditions = nil
			hc := o.hc.DeepCopy()
			logBuf.Reset()
			var fn = f.Fn
			for _, g := range nodepool.OracleConditionFunctions(rr) {
				if g.Name == f.Name {
					fn = g.Fn
				}
			}
			guard(fc, func() {
				res, err := fn(ctx, np, hc)
				fc.Conds = npConds(np)
				if res != nil {
					fc.value("shortCircuits", true)
				}
				for _, cd := range fc.Conds {
					switch cd.Type {
					case hyperv1.NodePoolValidReleaseImageConditionType, hyperv1.NodePoolValidPlatformConfigConditionType,
						hyperv1.NodePoolValidMachineConfigConditionType, hyperv1.NodePoolValidArchPlatform,
						hyperv1.NodePoolSupportedVersionSkewConditionType, hyperv1.NodePoolUpdateManagementEnabledConditionType:
						if cd.Status == "False" {
							fc.fail("%s=False (%s): %s", cd.Type, cd.Reason, cd.Message)
						}
					}
				}
				// An error after a False validation condition is how the function stops the
				// reconcile; any other error means it needs what a live reconcile would have.
				if err != nil {
					fc.value("error", err.Error())
					if fc.Result == "ok" {
						if live, why := liveOnly(err); live {
							fc.notJudged(why)
						} else {
							fc.notJudged("the function returned an error (it needs what the live reconcile would have made by then): " + err.Error())
						}
					}
				}
				if msgs := logMessages(); len(msgs) > 0 {
					fc.value("log", msgs)
				}
			})
			add(fc)
		}

	}
	if len(o.prevNPs) > 0 {
		judgeRollouts(in, o)
	}
}

func releaseImage(in *Input, image string) (*releaseinfo.ReleaseImage, bool) {
	if _, ok := in.Releases[image]; !ok {
		return nil, false
	}
	ri, err := releases(in).Lookup(context.Background(), image, nil)
	return ri, err == nil
}

func judgeRollouts(in *Input, o *objects) {
	for _, cur := range o.nps {
		var prev *hyperv1.NodePool
		for _, p := range o.prevNPs {
			if p.Name == cur.Name && p.Namespace == cur.Namespace {
				prev = p
			}
		}
		c := newCheck("nodepool.Rollout", "hypershift-operator/controllers/nodepool isUpdatingVersion, azureMachineTemplateSpec + generateMachineTemplateName (CAPI.machineTemplateBuilders' Azure branch), isUpdatingMachineTemplate", "the functions that decide a version rollout and a machine-template rollout, on the previous and the current NodePool; the config hash (HashWithoutVersion) is not judged")
		c.Subject = cur.Name
		if prev == nil {
			c.value("new", true)
			c.notJudged("no previous NodePool of this name (a new pool)")
			add(c)
			continue
		}
		c.value("upgradeType", cur.Spec.Management.UpgradeType)
		c.value("replicasPrevious", prev.Spec.Replicas)
		c.value("replicasCurrent", cur.Spec.Replicas)
		guard(c, func() {
			// Version: the target is the version of the current spec.release.image.
			if ri, ok := releaseImage(in, cur.Spec.Release.Image); ok {
				p := prev.DeepCopy()
				if p.Status.Version == "" {
					if pri, ok := releaseImage(in, prev.Spec.Release.Image); ok {
						p.Status.Version = pri.Version()
					}
				}
				c.value("versionPrevious", p.Status.Version)
				c.value("versionTarget", ri.Version())
				c.value("versionRollout", nodepool.OracleIsUpdatingVersion(p, ri.Version()))
				c.value("imagePrevious", prev.Spec.Release.Image)
				c.value("imageCurrent", cur.Spec.Release.Image)
			} else {
				c.notJudged(fmt.Sprintf("version of %s not in the input", cur.Spec.Release.Image))
			}
			if cur.Spec.Platform.Type == hyperv1.AzurePlatform && cur.Spec.Platform.Azure != nil && prev.Spec.Platform.Azure != nil {
				ri, _ := releaseImage(in, cur.Spec.Release.Image)
				pri, _ := releaseImage(in, prev.Spec.Release.Image)
				if ri == nil || pri == nil {
					c.notJudged("machine template: release versions not in the input")
					return
				}
				tp, _, errp := nodepool.OracleAzureMachineTemplateName(o.prevHC, prev, pri)
				tc, spec, errc := nodepool.OracleAzureMachineTemplateName(o.hc, cur, ri)
				noImage := func(err error) bool {
					return err != nil && strings.Contains(err.Error(), "no Azure VM image configured")
				}
				if noImage(errp) && noImage(errc) && prev.Spec.Platform.Azure.Image.Type == cur.Spec.Platform.Azure.Image.Type {
					// Neither pool names a boot image, and HyperShift's default comes from the release
					// payload's RHCOS stream metadata (the registry). It is the same for both (same
					// image type, defaulted from the payload), so the judgment holds it equal.
					hold := func(np *hyperv1.NodePool) *hyperv1.NodePool {
						np = np.DeepCopy()
						np.Spec.Platform.Azure.Image.Type = hyperv1.ImageID
						np.Spec.Platform.Azure.Image.ImageID = ptr.To("hcp-oracle-boot-image-held-equal")
						return np
					}
					tp, _, errp = nodepool.OracleAzureMachineTemplateName(o.prevHC, hold(prev), pri)
					tc, spec, errc = nodepool.OracleAzureMachineTemplateName(o.hc, hold(cur), ri)
					c.value("bootImage", "held equal: neither pool names one and HyperShift defaults it from the release payload's RHCOS stream metadata, which needs the registry")
				}
				if errp != nil || errc != nil {
					c.notJudged(fmt.Sprintf("machine template: %v %v", errp, errc))
					return
				}
				c.value("templatePrevious", tp)
				c.value("templateCurrent", tc)
				c.value("templateRollout", tp != tc)
				c.Objects = append(c.Objects, map[string]any{"kind": "AzureMachineTemplate", "name": tc, "spec": spec})
				if ann := cur.Annotations[nodepool.OracleAnnotationPlatformMachineTemplate]; ann != "" {
					c.value("currentTemplateAnnotation", ann)
					c.value("isUpdatingMachineTemplate", nodepool.OracleIsUpdatingMachineTemplate(cur, tc))
				}
			}
		})
		c.value("configHash", "not judged: HashWithoutVersion needs the control-plane operator's core ignition ConfigMaps (from the release payload on a live cluster)")
		add(c)
	}
}

// --- main ----------------------------------------------------------------------------------------

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: hcp-oracle INPUT.json|-")
		os.Exit(2)
	}
	var data []byte
	var err error
	if os.Args[1] == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	in := &Input{}
	if err := json.Unmarshal(data, in); err != nil {
		fmt.Fprintln(os.Stderr, "input is not the oracle's JSON:", err)
		os.Exit(2)
	}
	// HyperShift's logs go to stderr (quiet unless HCP_ORACLE_VERBOSE is set).
	var logw io.Writer = &logBuf
	if os.Getenv("HCP_ORACLE_VERBOSE") != "" {
		logw = io.MultiWriter(&logBuf, os.Stderr)
	}
	log.SetLogger(zap.New(zap.WriteTo(logw)))
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)

	out.APIVersion = "hcp-oracle/v1"
	out.Kind = "OracleReport"
	out.HyperShift.Commit = hypershiftCommit
	out.HyperShift.Branch = hypershiftBranch
	out.OracleSourceHash = oracleSourceHash
	out.Checks = []Check{}

	// HyperShift reads the operator's MANAGED_SERVICE env (support/azureutil IsAroHCP).
	os.Unsetenv("MANAGED_SERVICE")
	if in.Management.ManagedService != "" {
		os.Setenv("MANAGED_SERVICE", in.Management.ManagedService)
	}
	o := decode(in)
	if o.hc != nil {
		judgeHostedCluster(ctx, in, o)
		judgeControlPlane(ctx, o)
		if o.hc.Spec.Platform.Azure != nil && o.hc.Spec.Platform.Azure.Private.Type != "" {
			judgePrivateLink(ctx, o)
		} else {
			c := newCheck("azureprivatelinkservice.Observer", "control-plane-operator/controllers/azureprivatelinkservice", "-")
			c.notJudged("the HostedCluster has no spec.platform.azure.private (no Private Link for HyperShift to manage)")
			add(c)
		}
		judgeNodePools(ctx, in, o)
	}
	for _, c := range out.Checks {
		switch c.Result {
		case "ok":
			out.Summary.OK++
		case "failed":
			out.Summary.Failed++
		case "panic":
			out.Summary.Panic++
		default:
			out.Summary.NotJudged++
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}
