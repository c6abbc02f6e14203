// The schema table: every type of every served kind, in every served version.
// rbac.authorization.k8s.io (package "rbac") is served in v1 only.
//
// resource.k8s.io v1 and v1beta2 share one shape (kV1Shape). v1beta1 (kV1beta1Shape) differs
// only in Device (attributes and the rest sit under `basic`) and DeviceRequest (the fields of
// ExactDeviceRequest sit directly on the request), so only those definitions are written twice;
// the fields they share come from one helper each. DeviceTaintRule is not served in v1beta1.
// Descriptions are short on purpose: they are what `kubectl explain` prints.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "api/rest/schema.h"
#include "model/resource_types.h"

namespace qm::api::schema_internal {
namespace {

Prop Scalar(std::string name, ValueType type, std::string description) {
  Prop p;
  p.name = std::move(name);
  p.type = type;
  p.description = std::move(description);
  return p;
}

Prop Str(std::string name, std::string description) {
  return Scalar(std::move(name), ValueType::kString, std::move(description));
}
Prop I64(std::string name, std::string description) {
  return Scalar(std::move(name), ValueType::kInt64, std::move(description));
}
Prop I32(std::string name, std::string description) {
  return Scalar(std::move(name), ValueType::kInt32, std::move(description));
}
Prop Bool(std::string name, std::string description) {
  return Scalar(std::move(name), ValueType::kBool, std::move(description));
}
Prop Qty(std::string name, std::string description) {
  return Scalar(std::move(name), ValueType::kQuantity, std::move(description));
}
Prop Time(std::string name, std::string description) {
  return Scalar(std::move(name), ValueType::kTime, std::move(description));
}
Prop Raw(std::string name, std::string description) {
  return Scalar(std::move(name), ValueType::kRawExtension, std::move(description));
}
Prop Free(std::string name, std::string description) {
  return Scalar(std::move(name), ValueType::kFreeForm, std::move(description));
}
Prop Obj(std::string name, std::string ref, std::string description) {
  Prop p = Scalar(std::move(name), ValueType::kRef, std::move(description));
  p.ref = std::move(ref);
  return p;
}
Prop List(std::string name, ValueType type, std::string description) {
  Prop p = Scalar(std::move(name), type, std::move(description));
  p.shape = Shape::kList;
  return p;
}
Prop ListOf(std::string name, std::string ref, std::string description) {
  Prop p = Obj(std::move(name), std::move(ref), std::move(description));
  p.shape = Shape::kList;
  return p;
}
Prop Map(std::string name, ValueType type, std::string description) {
  Prop p = Scalar(std::move(name), type, std::move(description));
  p.shape = Shape::kMap;
  return p;
}
Prop MapOf(std::string name, std::string ref, std::string description) {
  Prop p = Obj(std::move(name), std::move(ref), std::move(description));
  p.shape = Shape::kMap;
  return p;
}
Prop Req(Prop p) {
  p.required = true;
  return p;
}

std::vector<Prop> Cat(std::vector<Prop> a, const std::vector<Prop>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Prop ApiVersionProp() {
  return Str("apiVersion",
             "Versioned schema of this representation, e.g. resource.k8s.io/v1. The server "
             "converts recognised values to its storage version.");
}
Prop KindProp() {
  return Str("kind", "The REST resource this object represents, in CamelCase, e.g. ResourceClaim.");
}

// apiVersion, kind and metadata: the head of every top-level kind.
std::vector<Prop> KindHead() {
  return {ApiVersionProp(), KindProp(),
          Obj("metadata", "meta.ObjectMeta",
              "Standard object metadata: name, namespace, labels, annotations and so on.")};
}

// ---------------------------------------------------------------------------------------------
// apimachinery meta/v1

std::vector<Def> MetaDefs() {
  return {
      {"meta.ObjectMeta",
       kAllShapes,
       "Metadata every persisted object has, including the ones users create.",
       {
           Str("name",
               "Name of the object, unique within its namespace (or the cluster for "
               "cluster-scoped kinds). Cannot be changed."),
           Str("generateName",
               "Prefix from which the server builds a unique name when name is empty."),
           Str("namespace", "Namespace the object lives in; empty for cluster-scoped kinds."),
           Str("selfLink", "Deprecated and no longer set by the server."),
           Str("uid", "Unique identifier the server assigns on creation; never reused."),
           Str("resourceVersion",
               "Opaque value that changes on every write. Used for optimistic concurrency and as "
               "the cursor for watches."),
           I64("generation",
               "Sequence number of the desired state; the server increments it when the spec "
               "changes."),
           Time("creationTimestamp", "When the server created the object. Read-only."),
           Time("deletionTimestamp",
                "When deletion was requested. Set by the server; the object goes away once its "
                "finalizers are gone."),
           I64("deletionGracePeriodSeconds",
               "Seconds the object has to terminate gracefully after deletion was requested."),
           Map("labels", ValueType::kString,
               "Key/value pairs for organising and selecting objects."),
           Map("annotations", ValueType::kString,
               "Key/value pairs for arbitrary, non-identifying metadata kept by tools."),
           ListOf("ownerReferences", "meta.OwnerReference",
                  "Objects this one depends on. The object is garbage collected when all owners "
                  "are gone."),
           List("finalizers", ValueType::kString,
                "Conditions that must be cleared before the object is removed from storage."),
           List("managedFields", ValueType::kFreeForm,
                "Which field manager owns which fields, for server-side apply."),
       }},
      {"meta.OwnerReference",
       kAllShapes,
       "Identifies an owning object, which must be in the same namespace or cluster-scoped.",
       {
           Req(Str("apiVersion", "API version of the owner.")),
           Req(Str("kind", "Kind of the owner.")),
           Req(Str("name", "Name of the owner.")),
           Req(Str("uid", "UID of the owner.")),
           Bool("controller", "True when this owner is the managing controller."),
           Bool("blockOwnerDeletion",
                "When true, the owner cannot be deleted in the foreground until this reference "
                "is removed."),
       }},
      {"meta.ListMeta",
       kAllShapes,
       "Metadata of a list response.",
       {
           Str("selfLink", "Deprecated and no longer set by the server."),
           Str("resourceVersion",
               "Version of the collection this list reflects; start a watch from it."),
           Str("continue", "Token for fetching the next page when the list was limited."),
           I64("remainingItemCount",
               "Number of items not yet returned when the list was limited, if known."),
       }},
      {"meta.Condition",
       kAllShapes,
       "One aspect of the current state of an object.",
       {
           Req(Str("type", "Type of the condition, in CamelCase.")),
           Req(Str("status", "Status of the condition: True, False or Unknown.")),
           I64("observedGeneration",
               "metadata.generation of the object this condition was computed from."),
           Req(Time("lastTransitionTime", "When the condition last changed status.")),
           Req(Str("reason", "Machine-readable reason for the last transition, in CamelCase.")),
           Req(Str("message", "Human-readable details about the last transition.")),
       }},
      {"meta.LabelSelector",
       kAllShapes,
       "A label query over a set of objects. The requirements are ANDed; an empty selector "
       "matches every object.",
       {
           Map("matchLabels", ValueType::kString,
               "key=value pairs, each equivalent to a matchExpressions entry with operator In "
               "and that single value."),
           ListOf("matchExpressions", "meta.LabelSelectorRequirement",
                  "Requirements on labels, ANDed."),
       }},
      {"meta.LabelSelectorRequirement",
       kAllShapes,
       "A key, an operator and values that a label must satisfy.",
       {
           Req(Str("key", "The label key the requirement applies to.")),
           Req(Str("operator", "One of In, NotIn, Exists, DoesNotExist.")),
           List("values", ValueType::kString,
                "Values for In and NotIn (non-empty); empty for Exists and DoesNotExist."),
       }},
      {"meta.Status",
       kAllShapes,
       "Result of an operation that does not return an object.",
       {
           ApiVersionProp(),
           KindProp(),
           Obj("metadata", "meta.ListMeta", "Standard list metadata."),
           Str("status", "Success or Failure."),
           Str("message", "Human-readable description of the result."),
           Str("reason", "Machine-readable reason for a failure, e.g. NotFound or Invalid."),
           Free("details", "Extra data about the failure, such as the field causes."),
           I32("code", "HTTP status code of the result."),
       }},
      {"meta.DeleteOptions",
       kAllShapes,
       "Options for a delete request.",
       {
           ApiVersionProp(),
           KindProp(),
           I64("gracePeriodSeconds", "Seconds before the object is deleted; 0 deletes at once."),
           Free("preconditions", "uid and resourceVersion that must match for the delete."),
           Bool("orphanDependents", "Deprecated: use propagationPolicy."),
           Str("propagationPolicy",
               "How dependents are garbage collected: Orphan, Background "
               "or Foreground."),
           List("dryRun", ValueType::kString, "When All, nothing is persisted."),
           Bool("ignoreStoreReadErrorWithClusterBreakingPotential",
                "Deletes an object that cannot be read from storage. Unsafe."),
       }},
  };
}

// ---------------------------------------------------------------------------------------------
// core/v1

std::vector<Def> CoreDefs() {
  return {
      {"core.NodeSelector",
       kAllShapes,
       "Selects nodes. The terms are ORed; an empty list matches no node.",
       {
           Req(ListOf("nodeSelectorTerms", "core.NodeSelectorTerm",
                      "Terms that are ORed together.")),
       }},
      {"core.NodeSelectorTerm",
       kAllShapes,
       "Requirements that are ANDed. An empty term matches no node.",
       {
           ListOf("matchExpressions", "core.NodeSelectorRequirement",
                  "Requirements on node labels."),
           ListOf("matchFields", "core.NodeSelectorRequirement",
                  "Requirements on node fields (metadata.name)."),
       }},
      {"core.NodeSelectorRequirement",
       kAllShapes,
       "A key, an operator and values that a node's label or field must satisfy.",
       {
           Req(Str("key", "Label key or field name the requirement applies to.")),
           Req(Str("operator", "One of In, NotIn, Exists, DoesNotExist, Gt, Lt.")),
           List("values", ValueType::kString,
                "Values for In and NotIn; one integer for Gt and Lt; empty for Exists and "
                "DoesNotExist."),
       }},

      {"core.Namespace", kAllShapes, "A scope for names of namespaced objects.",
       Cat(KindHead(),
           {
               Obj("spec", "core.NamespaceSpec", "What the namespace should look like."),
               Obj("status", "core.NamespaceStatus", "Observed state of the namespace."),
           })},
      {"core.NamespaceSpec",
       kAllShapes,
       "Desired state of a namespace.",
       {
           List("finalizers", ValueType::kString,
                "Values that must be removed before the namespace is deleted from storage."),
       }},
      {"core.NamespaceStatus",
       kAllShapes,
       "Observed state of a namespace.",
       {
           Str("phase", "Active or Terminating."),
           ListOf("conditions", "core.NamespaceCondition", "Latest observations of the namespace."),
       }},
      {"core.NamespaceCondition",
       kAllShapes,
       "One observation of a namespace's state.",
       {
           Req(Str("type", "Type of the condition.")),
           Req(Str("status", "True, False or Unknown.")),
           Time("lastTransitionTime", "When the condition last changed status."),
           Str("reason", "Machine-readable reason for the last transition."),
           Str("message", "Human-readable details about the last transition."),
       }},

      {"core.Node", kAllShapes, "A worker machine that runs pods.",
       Cat(KindHead(),
           {
               Obj("spec", "core.NodeSpec", "How the node is configured."),
               Obj("status", "core.NodeStatus", "Most recently observed state of the node."),
           })},
      {"core.NodeSpec",
       kAllShapes,
       "Desired configuration of a node.",
       {
           Str("podCIDR", "Pod IP range assigned to the node."),
           List("podCIDRs", ValueType::kString,
                "Pod IP ranges assigned to the node, at most one per IP family."),
           Str("providerID", "ID of the node in the cloud provider: <provider>://<id>."),
           Bool("unschedulable", "When true, no new pods are scheduled to the node."),
           ListOf("taints", "core.Taint", "Taints that repel pods which do not tolerate them."),
           Free("configSource", "Deprecated dynamic kubelet configuration source."),
           Str("externalID", "Deprecated; not used."),
       }},
      {"core.Taint",
       kAllShapes,
       "A taint on a node repels every pod that does not tolerate it.",
       {
           Req(Str("key", "Taint key.")),
           Str("value", "Taint value."),
           Req(Str("effect", "NoSchedule, PreferNoSchedule or NoExecute.")),
           Time("timeAdded", "When a NoExecute taint was added."),
       }},
      {"core.NodeStatus",
       kAllShapes,
       "Observed state of a node.",
       {
           Map("capacity", ValueType::kQuantity, "Total resources of the node."),
           Map("allocatable", ValueType::kQuantity,
               "Resources of the node available for pods; defaults to capacity."),
           Str("phase", "Deprecated lifecycle phase of the node."),
           ListOf("conditions", "core.NodeCondition",
                  "Current conditions of the node, such as Ready."),
           ListOf("addresses", "core.NodeAddress", "Addresses the node is reachable at."),
           Obj("daemonEndpoints", "core.NodeDaemonEndpoints",
               "Ports of daemons running on the node."),
           Obj("nodeInfo", "core.NodeSystemInfo", "General information about the node."),
           ListOf("images", "core.ContainerImage", "Container images present on the node."),
           List("volumesInUse", ValueType::kString, "Attachable volumes in use by the node."),
           ListOf("volumesAttached", "core.AttachedVolume", "Volumes attached to the node."),
           Free("config", "Status of the node's dynamic configuration."),
           Free("features", "Features the node implements."),
           List("runtimeHandlers", ValueType::kFreeForm,
                "Container runtime handlers available on the node."),
       }},
      {"core.NodeCondition",
       kAllShapes,
       "One observation of a node's state.",
       {
           Req(Str("type", "Type of the condition, e.g. Ready or MemoryPressure.")),
           Req(Str("status", "True, False or Unknown.")),
           Time("lastHeartbeatTime", "When the condition was last probed."),
           Time("lastTransitionTime", "When the condition last changed status."),
           Str("reason", "Machine-readable reason for the last transition."),
           Str("message", "Human-readable details about the last transition."),
       }},
      {"core.NodeAddress",
       kAllShapes,
       "One address of a node.",
       {
           Req(Str("type", "Hostname, InternalIP, ExternalIP, InternalDNS or ExternalDNS.")),
           Req(Str("address", "The address.")),
       }},
      {"core.NodeDaemonEndpoints",
       kAllShapes,
       "Ports opened by daemons on the node.",
       {
           Obj("kubeletEndpoint", "core.DaemonEndpoint", "Port the kubelet listens on."),
       }},
      {"core.DaemonEndpoint",
       kAllShapes,
       "One port a daemon listens on.",
       {
           Req(I32("Port", "Port number.")),
       }},
      {"core.NodeSystemInfo",
       kAllShapes,
       "Identifiers and versions reported by the node.",
       {
           Str("machineID", "Machine ID reported by the node."),
           Str("systemUUID", "System UUID reported by the node."),
           Str("bootID", "Boot ID reported by the node."),
           Str("kernelVersion", "Kernel version (uname -r)."),
           Str("osImage", "Operating system image, from /etc/os-release."),
           Str("containerRuntimeVersion", "Container runtime name and version."),
           Str("kubeletVersion", "Kubelet version."),
           Str("kubeProxyVersion", "Deprecated kube-proxy version."),
           Str("operatingSystem", "Operating system, e.g. linux."),
           Str("architecture", "CPU architecture, e.g. amd64."),
           Free("swap", "Swap memory information."),
       }},
      {"core.ContainerImage",
       kAllShapes,
       "A container image present on a node.",
       {
           List("names", ValueType::kString, "Names by which the image is known."),
           I64("sizeBytes", "Size of the image in bytes."),
       }},
      {"core.AttachedVolume",
       kAllShapes,
       "A volume attached to a node.",
       {
           Req(Str("name", "Name of the attached volume.")),
           Req(Str("devicePath", "Path where the volume is available on the node.")),
       }},
  };
}

// ---------------------------------------------------------------------------------------------
// core/v1 Pod, Event, ResourceQuota and ServiceAccount. Only what scheduling, claims and quota
// need is modelled field by field; a pod's spec, containers and status keep every other field as
// sent.

std::vector<Def> PodDefs() {
  return {
      {"core.Pod", kAllShapes,
       "A group of containers scheduled together onto one node, and the consumer of resource "
       "claims.",
       Cat(KindHead(),
           {
               Obj("spec", "core.PodSpec", "Desired behaviour of the pod."),
               Obj("status", "core.PodStatus",
                   "Most recently observed status of the pod. Written through /status."),
           })},
      {"core.PodSpec",
       kAllShapes,
       "Desired behaviour of a pod. Fields not listed here are kept as sent.",
       {
           Req(ListOf("containers", "core.Container",
                      "Containers of the pod; at least one. Cannot be added or removed.")),
           ListOf("initContainers", "core.Container",
                  "Containers run to completion, in order, before the regular containers."),
           List("ephemeralContainers", ValueType::kFreeForm,
                "Debugging containers added to a running pod."),
           Str("nodeName",
               "Node the pod is bound to. Set by the scheduler; once set it cannot change."),
           Map("nodeSelector", ValueType::kString,
               "Labels a node must have for the pod to be scheduled there."),
           Free("affinity", "Node, pod and anti-affinity scheduling constraints."),
           ListOf("tolerations", "core.Toleration",
                  "Node taints the pod tolerates. Existing entries cannot be changed."),
           ListOf("resourceClaims", "core.PodResourceClaim",
                  "Resource claims the pod uses, by name, from a claim or a claim template."),
           Str("schedulerName", "Scheduler that places the pod; default-scheduler by default."),
           I32("priority", "Priority of the pod; higher is scheduled first and may preempt."),
           Str("priorityClassName", "PriorityClass the pod's priority comes from."),
           Str("preemptionPolicy", "PreemptLowerPriority (the default) or Never."),
           Str("restartPolicy", "Always (the default), OnFailure or Never."),
           I64("terminationGracePeriodSeconds", "Seconds the pod has to stop gracefully."),
           I64("activeDeadlineSeconds",
               "Seconds the pod may run before it is failed. Can be lowered, not raised."),
           Str("dnsPolicy", "ClusterFirst (the default), ClusterFirstWithHostNet, Default, None."),
           Str("serviceAccountName", "Service account the pod runs as."),
           Str("serviceAccount", "Deprecated alias of serviceAccountName."),
           Bool("automountServiceAccountToken", "Whether a service account token is mounted."),
           Bool("hostNetwork", "Use the node's network namespace."),
           Bool("hostPID", "Use the node's PID namespace."),
           Bool("hostIPC", "Use the node's IPC namespace."),
           Free("securityContext", "Pod-level security attributes."),
           List("volumes", ValueType::kFreeForm, "Volumes the containers can mount."),
           List("imagePullSecrets", ValueType::kFreeForm, "Secrets for pulling images."),
           Str("hostname", "Hostname of the pod."),
           Str("subdomain", "Subdomain of the pod's fully qualified hostname."),
           Str("runtimeClassName", "RuntimeClass that runs the pod."),
           Map("overhead", ValueType::kQuantity, "Resources the pod sandbox uses."),
           List("topologySpreadConstraints", ValueType::kFreeForm,
                "How pods spread across topology domains."),
           ListOf("readinessGates", "core.PodReadinessGate",
                  "Extra conditions that must be True for the pod to be ready."),
           List("schedulingGates", ValueType::kFreeForm,
                "While any is present the pod is not scheduled."),
           Obj("resources", "core.ResourceRequirements",
               "Resources of the whole pod, shared by its containers."),
       },
       true},
      {"core.Container",
       kAllShapes,
       "One container of a pod. Fields not listed here are kept as sent.",
       {
           Req(Str("name", "Name of the container, a DNS label unique in the pod.")),
           Str("image", "Container image name."),
           List("command", ValueType::kString, "Entrypoint; the image's ENTRYPOINT when empty."),
           List("args", ValueType::kString, "Arguments to the entrypoint."),
           Str("workingDir", "Working directory of the container."),
           List("env", ValueType::kFreeForm, "Environment variables."),
           List("envFrom", ValueType::kFreeForm, "Sources of environment variables."),
           List("ports", ValueType::kFreeForm, "Ports the container exposes."),
           Obj("resources", "core.ResourceRequirements",
               "Compute resources and resource claims of the container."),
           List("volumeMounts", ValueType::kFreeForm, "Volumes mounted into the container."),
           Str("imagePullPolicy", "Always, Never or IfNotPresent."),
           Free("securityContext", "Container-level security attributes."),
           Str("restartPolicy", "For init containers: Always makes it a sidecar."),
       },
       true},
      {"core.ResourceRequirements",
       kAllShapes,
       "Compute resources and resource claims.",
       {
           Map("limits", ValueType::kQuantity,
               "Maximum amount of each resource; extended resources such as nvidia.com/gpu are "
               "requested here."),
           Map("requests", ValueType::kQuantity,
               "Minimum amount of each resource; defaults to the limits."),
           ListOf("claims", "core.ResourceClaim",
                  "Entries of spec.resourceClaims this container uses."),
       }},
      {"core.ResourceClaim",
       kAllShapes,
       "A reference from a container to one entry of the pod's spec.resourceClaims.",
       {
           Req(Str("name", "Name of an entry in spec.resourceClaims.")),
           Str("request", "Only the devices of this request of the claim."),
       }},
      {"core.PodResourceClaim",
       kAllShapes,
       "A claim the pod uses; exactly one of resourceClaimName and resourceClaimTemplateName.",
       {
           Req(Str("name", "Name of the entry, a DNS label unique in the pod.")),
           Str("resourceClaimName", "An existing ResourceClaim in the pod's namespace."),
           Str("resourceClaimTemplateName",
               "A ResourceClaimTemplate from which a claim is generated for this pod."),
       }},
      {"core.Toleration",
       kAllShapes,
       "Tolerates node taints that match key, value and effect.",
       {
           Str("key", "Taint key to match; empty with operator Exists matches every taint."),
           Str("operator", "Equal (the default) or Exists."),
           Str("value", "Taint value to match with Equal."),
           Str("effect", "Taint effect to match; empty matches every effect."),
           I64("tolerationSeconds", "For NoExecute: how long the taint is tolerated."),
       }},
      {"core.PodReadinessGate",
       kAllShapes,
       "A pod condition that must be True for the pod to be ready.",
       {
           Req(Str("conditionType", "Type of the pod condition.")),
       }},
      {"core.PodStatus",
       kAllShapes,
       "Observed state of a pod. Fields not listed here are kept as sent.",
       {
           Str("phase", "Pending, Running, Succeeded, Failed or Unknown."),
           ListOf("conditions", "core.PodCondition",
                  "Current conditions of the pod, such as PodScheduled."),
           Str("message", "Human-readable reason the pod is in this state."),
           Str("reason", "Brief reason the pod is in this state, in CamelCase."),
           Str("nominatedNodeName", "Node the pod is expected to run on after preemption."),
           Str("hostIP", "IP of the node the pod runs on."),
           List("hostIPs", ValueType::kFreeForm, "IPs of the node the pod runs on."),
           Str("podIP", "IP of the pod."),
           List("podIPs", ValueType::kFreeForm, "IPs of the pod."),
           Time("startTime", "When the kubelet acknowledged the pod."),
           List("initContainerStatuses", ValueType::kFreeForm, "Status of the init containers."),
           List("containerStatuses", ValueType::kFreeForm, "Status of the containers."),
           List("ephemeralContainerStatuses", ValueType::kFreeForm,
                "Status of the ephemeral containers."),
           Str("qosClass", "Quality of service class: Guaranteed, Burstable or BestEffort."),
           ListOf("resourceClaimStatuses", "core.PodResourceClaimStatus",
                  "Names of the claims generated for the pod's template entries."),
           I64("observedGeneration", "metadata.generation this status was computed from."),
       },
       true},
      {"core.PodCondition",
       kAllShapes,
       "One observation of a pod's state.",
       {
           Req(Str("type", "Type of the condition, e.g. PodScheduled or Ready.")),
           Req(Str("status", "True, False or Unknown.")),
           Time("lastProbeTime", "When the condition was last probed."),
           Time("lastTransitionTime", "When the condition last changed status."),
           Str("reason", "Machine-readable reason for the last transition."),
           Str("message", "Human-readable details about the last transition."),
           I64("observedGeneration", "metadata.generation this condition was computed from."),
       }},
      {"core.PodResourceClaimStatus",
       kAllShapes,
       "The claim generated for one spec.resourceClaims entry.",
       {
           Req(Str("name", "Name of the spec.resourceClaims entry.")),
           Str("resourceClaimName",
               "Name of the generated ResourceClaim; unset when none was needed."),
       }},

      {"core.Event", kAllShapes, "A report of something that happened to an object.",
       Cat(KindHead(),
           {
               Req(Obj("involvedObject", "core.ObjectReference",
                       "The object this event is about.")),
               Str("reason", "Short, machine-readable reason for the event, in CamelCase."),
               Str("message", "Human-readable description of the event."),
               Obj("source", "core.EventSource", "Component that reported the event."),
               Time("firstTimestamp", "When the event was first recorded."),
               Time("lastTimestamp", "When the event last recurred."),
               I32("count", "How many times the event occurred."),
               Str("type", "Normal or Warning."),
               Str("eventTime", "When the event first happened, with microseconds."),
               Obj("series", "core.EventSeries", "Data about a series of recurring events."),
               Str("action", "What was done, or failed, about the object."),
               Obj("related", "core.ObjectReference", "A second object involved."),
               Str("reportingComponent", "Controller that emitted the event."),
               Str("reportingInstance", "Instance of the controller that emitted the event."),
           })},
      {"core.ObjectReference",
       kAllShapes,
       "A reference to an object.",
       {
           Str("kind", "Kind of the object."),
           Str("namespace", "Namespace of the object."),
           Str("name", "Name of the object."),
           Str("uid", "UID of the object."),
           Str("apiVersion", "API version of the object."),
           Str("resourceVersion", "Resource version of the object that was referenced."),
           Str("fieldPath", "A part of the object, e.g. spec.containers{name}."),
       }},
      {"core.EventSource",
       kAllShapes,
       "The component that reported an event.",
       {
           Str("component", "Component that reported the event."),
           Str("host", "Node the component runs on."),
       }},
      {"core.EventSeries",
       kAllShapes,
       "A series of recurring events.",
       {
           I32("count", "Number of occurrences so far."),
           Str("lastObservedTime", "When the last occurrence was observed, with microseconds."),
       }},

      {"core.ResourceQuota", kAllShapes,
       "Limits on the total resources and object counts of one namespace.",
       Cat(KindHead(),
           {
               Obj("spec", "core.ResourceQuotaSpec", "The limits."),
               Obj("status", "core.ResourceQuotaStatus",
                   "Limits in force and current usage. Written through /status."),
           })},
      {"core.ResourceQuotaSpec",
       kAllShapes,
       "The limits of a quota.",
       {
           Map("hard", ValueType::kQuantity,
               "Limit per resource name, e.g. count/pods, requests.nvidia.com/gpu or "
               "gpu.nvidia.com.deviceclass.resource.k8s.io/devices."),
           List("scopes", ValueType::kString, "Only objects in all these scopes are counted."),
           Free("scopeSelector", "Only objects matching these scope expressions are counted."),
       }},
      {"core.ResourceQuotaStatus",
       kAllShapes,
       "Limits in force and current usage of a quota.",
       {
           Map("hard", ValueType::kQuantity, "Limits in force, by resource name."),
           Map("used", ValueType::kQuantity, "Current usage, by resource name."),
       }},

      {"core.ServiceAccount", kAllShapes,
       "An identity for processes: bound to roles like a user, and named in bearer tokens "
       "issued for it.",
       Cat(KindHead(),
           {
               ListOf("secrets", "core.ObjectReference",
                      "Secrets in the same namespace that pods running as this account may use."),
               ListOf("imagePullSecrets", "core.LocalObjectReference",
                      "Secrets in the same namespace used to pull the images of pods running as "
                      "this account."),
               Bool("automountServiceAccountToken",
                    "Whether pods running as this account get an API token mounted "
                    "automatically."),
           })},
      {"core.LocalObjectReference",
       kAllShapes,
       "Names an object in the same namespace.",
       {
           Str("name", "Name of the referent."),
       }},
  };
}

// ---------------------------------------------------------------------------------------------
// rbac.authorization.k8s.io/v1

std::vector<Def> RbacDefs() {
  const Prop rules = ListOf("rules", "rbac.PolicyRule", "The permissions this role grants.");
  const Prop role_ref = Req(Obj("roleRef", "rbac.RoleRef",
                                "The role being granted. Cannot be changed once the binding "
                                "exists."));
  const Prop subjects =
      ListOf("subjects", "rbac.Subject", "Users, groups and service accounts granted the role.");
  return {
      {"rbac.Role", kAllShapes,
       "A namespaced set of permissions, granted within its namespace by a RoleBinding.",
       Cat(KindHead(), {rules})},
      {"rbac.ClusterRole", kAllShapes,
       "A cluster-wide set of permissions, granted by a ClusterRoleBinding or, within one "
       "namespace, by a RoleBinding.",
       Cat(KindHead(),
           {rules, Obj("aggregationRule", "rbac.AggregationRule",
                       "How the rules of this role are built from other ClusterRoles. Accepted "
                       "and stored; this server does not aggregate.")})},
      {"rbac.RoleBinding", kAllShapes,
       "Grants the permissions of a Role or ClusterRole to subjects, within the binding's "
       "namespace.",
       Cat(KindHead(), {subjects, role_ref})},
      {"rbac.ClusterRoleBinding", kAllShapes,
       "Grants the permissions of a ClusterRole to subjects across the cluster.",
       Cat(KindHead(), {subjects, role_ref})},
      {"rbac.PolicyRule",
       kAllShapes,
       "Verbs allowed on resources or non-resource URLs. A rule names resources (with "
       "apiGroups) or nonResourceURLs, not both.",
       {
           Req(List("verbs", ValueType::kString,
                    "Verbs the rule allows, e.g. get, list, create; '*' allows every verb.")),
           List("apiGroups", ValueType::kString,
                "API groups of the resources; \"\" is the core group, '*' every group."),
           List("resources", ValueType::kString,
                "Resources the rule applies to, e.g. pods or resourceclaims/status; '*' every "
                "resource, '*/status' a subresource of every resource."),
           List("resourceNames", ValueType::kString, "When set, only these object names match."),
           List("nonResourceURLs", ValueType::kString,
                "URL paths the rule applies to, e.g. /healthz; a trailing '*' matches a prefix. "
                "Only in ClusterRoles."),
       }},
      {"rbac.AggregationRule",
       kAllShapes,
       "Selects the ClusterRoles whose rules are combined into this one.",
       {
           ListOf("clusterRoleSelectors", "meta.LabelSelector",
                  "Selectors of the ClusterRoles to aggregate; ORed."),
       }},
      {"rbac.RoleRef",
       kAllShapes,
       "The role a binding grants.",
       {
           Req(Str("apiGroup", "Group of the role: rbac.authorization.k8s.io.")),
           Req(Str("kind", "Role or ClusterRole.")),
           Req(Str("name", "Name of the role.")),
       }},
      {"rbac.Subject",
       kAllShapes,
       "Who a binding grants a role to: a user, a group or a service account.",
       {
           Req(Str("kind", "User, Group or ServiceAccount.")),
           Str("apiGroup",
               "rbac.authorization.k8s.io for User and Group, \"\" for ServiceAccount (the "
               "defaults)."),
           Req(Str("name", "Name of the user, group or service account.")),
           Str("namespace",
               "Namespace of a ServiceAccount; required in ClusterRoleBindings, defaults to the "
               "binding's namespace in RoleBindings."),
       }},
  };
}

// ---------------------------------------------------------------------------------------------
// resource.k8s.io

// The fields of a device that v1 holds directly and v1beta1 holds under `basic`.
std::vector<Prop> DeviceFields() {
  return {
      MapOf("attributes", "resource.DeviceAttribute",
            "Attributes of the device, keyed by qualified name. Together with capacity, at most "
            "32 entries."),
      MapOf("capacity", "resource.DeviceCapacity",
            "Capacities of the device, keyed by qualified name."),
      ListOf("consumesCounters", "resource.DeviceCounterConsumption",
             "Counters from the pool's shared counter sets that allocating this device uses up. "
             "At most 2 entries."),
      Str("nodeName",
          "Node the device is available on. Only with spec.perDeviceNodeSelection; exactly one "
          "of nodeName, nodeSelector and allNodes."),
      Obj("nodeSelector", "core.NodeSelector",
          "Nodes the device is available on. Only with spec.perDeviceNodeSelection."),
      Bool("allNodes",
           "The device is available on every node. Only with spec.perDeviceNodeSelection."),
      ListOf("taints", "resource.DeviceTaint",
             "Taints of the device. Claims that do not tolerate them cannot use it. At most 16."),
      Bool("bindsToNode",
           "When true, the allocation is restricted to the node chosen by the scheduler."),
      List("bindingConditions", ValueType::kString,
           "Conditions that must be True in the claim's device status before a pod using the "
           "device is bound. At most 4."),
      List("bindingFailureConditions", ValueType::kString,
           "Conditions that, when True in the claim's device status, fail the binding. At most "
           "4."),
      Bool("allowMultipleAllocations",
           "When true, the device can be allocated to several claims at once, sharing its "
           "capacity."),
      Map("nodeAllocatableResources", ValueType::kFreeForm,
          "Node allocatable resources that allocating the device accounts for, keyed by "
          "resource name."),
  };
}

// The fields v1 holds in ExactDeviceRequest and v1beta1 directly on DeviceRequest.
std::vector<Prop> ExactRequestFields(bool device_class_required) {
  Prop device_class = Str("deviceClassName",
                          "DeviceClass whose selectors and configuration apply to this request.");
  if (device_class_required) device_class = Req(device_class);
  return {
      device_class,
      ListOf("selectors", "resource.DeviceSelector",
             "Selectors a device must satisfy, on top of the class's. At most 32."),
      Str("allocationMode", "ExactCount (the default) or All devices that match."),
      I64("count", "Number of devices for ExactCount; defaults to 1."),
      Bool("adminAccess",
           "Requests administrative access, which also gives access to devices already in use. "
           "Needs the namespace label resource.kubernetes.io/admin-access=true."),
      ListOf("tolerations", "resource.DeviceToleration",
             "Device taints this request tolerates. At most 16."),
      Obj("capacity", "resource.CapacityRequirements",
          "Amounts of device capacity the request consumes."),
  };
}

std::vector<Def> ResourceDefs() {
  return {
      // DeviceClass.
      {"resource.DeviceClass", kAllShapes,
       "A vendor or admin-provided class of devices: selectors and configuration that requests "
       "naming the class inherit.",
       Cat(KindHead(), {Req(Obj("spec", "resource.DeviceClassSpec",
                                "Which devices belong to the class and how they are "
                                "configured."))})},
      {"resource.DeviceClassSpec",
       kAllShapes,
       "Selectors and configuration of a device class.",
       {
           ListOf("selectors", "resource.DeviceSelector",
                  "Selectors every device of the class must satisfy. At most 32."),
           ListOf("config", "resource.DeviceClassConfiguration",
                  "Configuration passed to drivers for devices of this class. At most 32."),
           Str("extendedResourceName",
               "Extended resource name that pods can request in resources.requests to get a "
               "device of this class."),
       }},
      {"resource.DeviceClassConfiguration",
       kAllShapes,
       "One configuration entry of a class.",
       {
           Obj("opaque", "resource.OpaqueDeviceConfiguration", "Driver-specific parameters."),
       }},
      {"resource.OpaqueDeviceConfiguration",
       kAllShapes,
       "Parameters in a format only the named driver understands.",
       {
           Req(Str("driver", "Driver the parameters are for, e.g. gpu.example.com.")),
           Req(Raw("parameters",
                   "The parameters: any JSON object, at most 10 KiB, passed to the driver "
                   "unchanged.")),
       }},
      {"resource.DeviceSelector",
       kAllShapes,
       "One selector; exactly one field must be set.",
       {
           Obj("cel", "resource.CELDeviceSelector", "A CEL expression over the device."),
       }},
      {"resource.CELDeviceSelector",
       kAllShapes,
       "Selects devices with a CEL expression.",
       {
           Req(Str("expression",
                   "CEL expression that evaluates to true for a matching device. It can read "
                   "device.driver, device.attributes, device.capacity and "
                   "device.allowMultipleAllocations.")),
       }},

      // ResourceSlice.
      {"resource.ResourceSlice", kAllShapes,
       "Devices that a driver publishes for one pool, or part of one.",
       Cat(KindHead(), {Req(Obj("spec", "resource.ResourceSliceSpec",
                                "The devices and where they are available."))})},
      {"resource.ResourceSliceSpec",
       kAllShapes,
       "Contents of a resource slice.",
       {
           Req(Str("driver", "Driver that publishes the devices. Cannot be changed.")),
           Req(Obj("pool", "resource.ResourcePool", "Pool the devices belong to.")),
           Str("nodeName",
               "Node that provides the devices. One of nodeName, nodeSelector, allNodes and "
               "perDeviceNodeSelection must be set."),
           Obj("nodeSelector", "core.NodeSelector",
               "Nodes the devices are available on; exactly one term."),
           Bool("allNodes", "The devices are available on every node."),
           Bool("perDeviceNodeSelection", "Each device says itself where it is available."),
           ListOf("devices", "resource.Device", "Devices in this slice. At most 128."),
           ListOf("sharedCounters", "resource.CounterSet",
                  "Counter sets that devices of the pool consume. At most 8; a slice holds "
                  "either devices or shared counters."),
           Str("partitionTypeAttribute",
               "Fully qualified attribute that names the partition type of the devices."),
           List("skipNodeOperations", ValueType::kString,
                "Node operations the driver does not need: NodePrepareResources, "
                "NodeUnprepareResources or *."),
       }},
      {"resource.ResourcePool",
       kAllShapes,
       "Identifies the pool a slice belongs to.",
       {
           Req(Str("name", "Pool name, unique per driver; DNS subdomains joined by /.")),
           Req(I64("generation",
                   "Generation of the pool; only slices of the highest generation count.")),
           Req(I64("resourceSliceCount", "Number of slices in the pool at this generation.")),
       }},
      {"resource.Device", kV1Shape, "One device that can be allocated.",
       Cat({Req(Str("name", "Device name, a DNS label unique within the pool."))}, DeviceFields())},
      {"resource.Device",
       kV1beta1Shape,
       "One device that can be allocated.",
       {
           Req(Str("name", "Device name, a DNS label unique within the pool.")),
           Obj("basic", "resource.BasicDevice", "Attributes and capacities of the device."),
       }},
      {"resource.BasicDevice", kV1beta1Shape, "Attributes and capacities of a device.",
       DeviceFields()},
      {"resource.DeviceAttribute",
       kAllShapes,
       "One attribute value; exactly one field is set.",
       {
           I64("int", "An integer."),
           Bool("bool", "A boolean."),
           Str("string", "A string of at most 64 bytes."),
           Str("version", "A semantic version 2.0.0 string of at most 64 bytes."),
           List("ints", ValueType::kInt64, "A non-empty list of integers."),
           List("bools", ValueType::kBool, "A non-empty list of booleans."),
           List("strings", ValueType::kString, "A non-empty list of strings."),
           List("versions", ValueType::kString, "A non-empty list of semantic versions."),
       }},
      {"resource.DeviceCapacity",
       kAllShapes,
       "One capacity of a device.",
       {
           Req(Qty("value", "Total amount; allocation never changes it.")),
           Obj("requestPolicy", "resource.CapacityRequestPolicy",
               "How requests consume this capacity when the device can be shared."),
       }},
      {"resource.CapacityRequestPolicy",
       kAllShapes,
       "Rules for amounts requested from a shared capacity.",
       {
           Qty("default", "Amount consumed when a request does not name this capacity."),
           List("validValues", ValueType::kQuantity,
                "Allowed amounts in ascending order; requests are rounded up. At most 10."),
           Obj("validRange", "resource.CapacityRequestPolicyRange",
               "Allowed range of amounts; requests are rounded up to a step."),
       }},
      {"resource.CapacityRequestPolicyRange",
       kAllShapes,
       "A range of allowed amounts.",
       {
           Req(Qty("min", "Smallest amount; smaller requests are raised to it.")),
           Qty("max", "Largest amount."),
           Qty("step", "Amounts are min plus a multiple of step."),
       }},
      {"resource.DeviceCounterConsumption",
       kAllShapes,
       "Counters a device consumes from one shared counter set.",
       {
           Req(Str("counterSet", "Name of the counter set in the pool.")),
           Req(MapOf("counters", "resource.Counter", "Amounts consumed, by counter name.")),
       }},
      {"resource.CounterSet",
       kAllShapes,
       "A named set of counters shared by devices.",
       {
           Req(Str("name", "Name of the set, a DNS label unique in the pool.")),
           Req(MapOf("counters", "resource.Counter",
                     "Available amounts, by counter name. 1 to 32 entries.")),
       }},
      {"resource.Counter",
       kAllShapes,
       "An amount of a counter.",
       {
           Req(Qty("value", "The amount.")),
       }},
      {"resource.DeviceTaint",
       kAllShapes,
       "A taint on a device: claims that do not tolerate it cannot use the device.",
       {
           Req(Str("key", "Taint key, a label name.")),
           Str("value", "Taint value, a label value."),
           Req(Str("effect", "None, NoSchedule or NoExecute.")),
           Time("timeAdded", "When the taint was added; set by the server when empty."),
       }},

      // ResourceClaim.
      {"resource.ResourceClaim", kAllShapes,
       "A request for devices, and the result of allocating them.",
       Cat(KindHead(),
           {
               Req(Obj("spec", "resource.ResourceClaimSpec",
                       "What is requested. Cannot be changed.")),
               Obj("status", "resource.ResourceClaimStatus",
                   "Whether and how the claim was allocated, and who uses it."),
           })},
      {"resource.ResourceClaimSpec",
       kAllShapes,
       "What a claim asks for.",
       {
           Obj("devices", "resource.DeviceClaim", "The devices requested."),
       }},
      {"resource.DeviceClaim",
       kAllShapes,
       "Device requests, constraints and configuration.",
       {
           ListOf("requests", "resource.DeviceRequest",
                  "Requests; each is satisfied separately. At most 32."),
           ListOf("constraints", "resource.DeviceConstraint",
                  "Constraints across the devices of several requests. At most 32."),
           ListOf("config", "resource.DeviceClaimConfiguration",
                  "Configuration for the drivers of the allocated devices. At most 32."),
       }},
      {"resource.DeviceRequest",
       kV1Shape,
       "One request; exactly one of exactly and firstAvailable is set.",
       {
           Req(Str("name", "Request name, a DNS label unique in the claim.")),
           Obj("exactly", "resource.ExactDeviceRequest", "Devices of one class."),
           ListOf("firstAvailable", "resource.DeviceSubRequest",
                  "Alternatives in order of preference; the first that can be satisfied is "
                  "used. 1 to 8."),
       }},
      {"resource.DeviceRequest", kV1beta1Shape,
       "One request: either deviceClassName and the fields next to it, or firstAvailable.",
       Cat({Req(Str("name", "Request name, a DNS label unique in the claim."))},
           Cat(ExactRequestFields(false),
               {ListOf("firstAvailable", "resource.DeviceSubRequest",
                       "Alternatives in order of preference; the first that can be satisfied is "
                       "used. 1 to 8.")}))},
      {"resource.ExactDeviceRequest", kV1Shape, "Devices of one class.", ExactRequestFields(true)},
      {"resource.DeviceSubRequest",
       kAllShapes,
       "One alternative of a firstAvailable request.",
       {
           Req(Str("name",
                   "Subrequest name, a DNS label; results name it <request>/<subrequest>.")),
           Req(Str("deviceClassName", "DeviceClass the devices must belong to.")),
           ListOf("selectors", "resource.DeviceSelector",
                  "Selectors a device must satisfy, on top of the class's. At most 32."),
           Str("allocationMode", "ExactCount (the default) or All devices that match."),
           I64("count", "Number of devices for ExactCount; defaults to 1."),
           ListOf("tolerations", "resource.DeviceToleration",
                  "Device taints this subrequest tolerates. At most 16."),
           Obj("capacity", "resource.CapacityRequirements",
               "Amounts of device capacity the subrequest consumes."),
       }},
      {"resource.CapacityRequirements",
       kAllShapes,
       "Capacity amounts a request needs.",
       {
           Map("requests", ValueType::kQuantity,
               "Minimum amount of each named capacity the device must have left."),
       }},
      {"resource.DeviceToleration",
       kAllShapes,
       "Tolerates matching device taints.",
       {
           Str("key", "Taint key to match; empty matches every key (operator Exists)."),
           Str("operator", "Equal (the default) or Exists."),
           Str("value", "Taint value to match with Equal."),
           Str("effect", "Taint effect to match; empty matches every effect."),
           I64("tolerationSeconds",
               "For NoExecute: how long the taint is tolerated; unset means forever."),
       }},
      {"resource.DeviceConstraint",
       kAllShapes,
       "A constraint over devices of several requests; exactly one rule is set.",
       {
           List("requests", ValueType::kString,
                "Requests (or request/subrequest) the constraint covers; empty means all."),
           Str("matchAttribute",
               "Fully qualified attribute that every device must have with the same value."),
           Str("distinctAttribute",
               "Fully qualified attribute that every device must have with different values."),
       }},
      {"resource.DeviceClaimConfiguration",
       kAllShapes,
       "One configuration entry of a claim.",
       {
           List("requests", ValueType::kString,
                "Requests the configuration applies to; empty means all."),
           Obj("opaque", "resource.OpaqueDeviceConfiguration", "Driver-specific parameters."),
       }},
      {"resource.ResourceClaimStatus",
       kAllShapes,
       "Allocation and use of a claim.",
       {
           Obj("allocation", "resource.AllocationResult",
               "Set once the claim is allocated. Cannot be changed, only removed."),
           ListOf("reservedFor", "resource.ResourceClaimConsumerReference",
                  "Consumers (usually pods) allowed to use the claim. At most 256."),
           ListOf("devices", "resource.AllocatedDeviceStatus",
                  "Status reported by drivers for allocated devices."),
       }},
      {"resource.AllocationResult",
       kAllShapes,
       "The result of allocating a claim.",
       {
           Obj("devices", "resource.DeviceAllocationResult", "The allocated devices."),
           Obj("nodeSelector", "core.NodeSelector",
               "Nodes where the allocated devices are usable; empty means everywhere."),
           Time("allocationTimestamp", "When the claim was allocated."),
       }},
      {"resource.DeviceAllocationResult",
       kAllShapes,
       "Allocated devices and their configuration.",
       {
           ListOf("results", "resource.DeviceRequestAllocationResult",
                  "One entry per allocated device. At most 32."),
           ListOf("config", "resource.DeviceAllocationConfiguration",
                  "Configuration from the classes and the claim. At most 64."),
       }},
      {"resource.DeviceRequestAllocationResult",
       kAllShapes,
       "One allocated device.",
       {
           Req(Str("request", "Request (or request/subrequest) the device was allocated for.")),
           Req(Str("driver", "Driver of the device.")),
           Req(Str("pool", "Pool of the device.")),
           Req(Str("device", "Name of the device in its pool.")),
           Bool("adminAccess", "True when allocated for administrative access."),
           ListOf("tolerations", "resource.DeviceToleration",
                  "Tolerations of the request at allocation time."),
           List("bindingConditions", ValueType::kString,
                "Binding conditions copied from the device."),
           List("bindingFailureConditions", ValueType::kString,
                "Binding failure conditions copied from the device."),
           Str("shareID", "Distinguishes allocations of a shareable device; a UUID."),
           Map("consumedCapacity", ValueType::kQuantity,
               "Capacity consumed on a shareable device, by capacity name."),
           List("skipNodeOperations", ValueType::kString,
                "Node operations skipped for the device, copied from its slice."),
       }},
      {"resource.DeviceAllocationConfiguration",
       kAllShapes,
       "Configuration for allocated devices.",
       {
           Req(Str("source", "FromClass or FromClaim.")),
           List("requests", ValueType::kString,
                "Requests the configuration applies to; empty means all."),
           Obj("opaque", "resource.OpaqueDeviceConfiguration", "Driver-specific parameters."),
       }},
      {"resource.ResourceClaimConsumerReference",
       kAllShapes,
       "An object that uses a claim.",
       {
           Str("apiGroup", "API group of the consumer; empty for the core group."),
           Req(Str("resource", "Resource type of the consumer, e.g. pods.")),
           Req(Str("name", "Name of the consumer.")),
           Req(Str("uid", "UID of the consumer.")),
       }},
      {"resource.AllocatedDeviceStatus",
       kAllShapes,
       "Status of one allocated device, reported by its driver.",
       {
           Req(Str("driver", "Driver of the device.")),
           Req(Str("pool", "Pool of the device.")),
           Req(Str("device", "Name of the device in its pool.")),
           Str("shareID", "Share ID of the allocation, for shareable devices."),
           ListOf("conditions", "meta.Condition", "Conditions of the device. At most 8."),
           Raw("data", "Driver-specific data: any JSON object of at most 10 KiB."),
           Obj("networkData", "resource.NetworkDeviceData",
               "Network details of the device, if it is a network device."),
       }},
      {"resource.NetworkDeviceData",
       kAllShapes,
       "Network details of an allocated device.",
       {
           Str("interfaceName", "Name of the network interface."),
           List("ips", ValueType::kString, "IP addresses in CIDR form. At most 16."),
           Str("hardwareAddress", "Hardware (MAC) address of the interface."),
       }},

      // ResourceClaimTemplate.
      {"resource.ResourceClaimTemplate", kAllShapes,
       "A template from which a claim is created for each pod that references it.",
       Cat(KindHead(), {Req(Obj("spec", "resource.ResourceClaimTemplateSpec",
                                "The claim to create. Cannot be changed."))})},
      {"resource.ResourceClaimTemplateSpec",
       kAllShapes,
       "The claim a template creates.",
       {
           Obj("metadata", "meta.ObjectMeta",
               "Labels and annotations copied into each created claim."),
           Req(Obj("spec", "resource.ResourceClaimSpec", "Spec of each created claim.")),
       }},

      // DeviceTaintRule (v1 and v1beta2 only).
      {"resource.DeviceTaintRule", kV1Shape,
       "Adds one taint to every device that matches a selector, as if the driver had "
       "published it.",
       Cat(KindHead(),
           {
               Req(Obj("spec", "resource.DeviceTaintRuleSpec", "The selector and the taint.")),
               Obj("status", "resource.DeviceTaintRuleStatus", "Observed state of the rule."),
           })},
      {"resource.DeviceTaintRuleSpec",
       kV1Shape,
       "Which devices get which taint.",
       {
           Obj("deviceSelector", "resource.DeviceTaintSelector",
               "Devices the taint applies to; without a selector no device matches."),
           Req(Obj("taint", "resource.DeviceTaint", "The taint to add.")),
       }},
      {"resource.DeviceTaintSelector",
       kV1Shape,
       "Selects devices by driver, pool and name; every field set must match.",
       {
           Str("driver", "Only devices of this driver."),
           Str("pool", "Only devices in this pool."),
           Str("device", "Only devices with this name."),
       }},
      {"resource.DeviceTaintRuleStatus",
       kV1Shape,
       "Observed state of a taint rule.",
       {
           ListOf("conditions", "meta.Condition",
                  "Conditions of the rule, e.g. whether evictions are in progress. At most 8."),
       }},
  };
}

// ---------------------------------------------------------------------------------------------
// admin.quartermaster.io/v1alpha1: create-only reviews (api/rest/admin_api.h). Their status is
// computed, never sent, so it is described but not modelled field by field.

std::vector<Def> AdminDefs() {
  auto review = [](std::string kind, std::string description, std::string status) {
    return Def{"admin." + kind, kAllShapes, std::move(description),
               Cat(KindHead(), {Req(Obj("spec", "admin." + kind + "Spec", "What to review.")),
                                Free("status", std::move(status))})};
  };
  const Prop range = Str("range",
                         "How far back from now, as a duration: 1h, 24h, 7d. Not together with "
                         "start.");
  return {
      review("DeviceMatchReview",
             "Which devices a device class and/or CEL selectors match, now. Create-only; "
             "nothing is stored.",
             "The outcome: devices (nodeName, driver, pool, device, attributes, capacity, "
             "taints, allocatedTo), matchedDevices, allocatedDevices, nodes, truncated, errors "
             "(field, message, line, column, offset per problem) and evaluationErrors."),
      {"admin.DeviceMatchReviewSpec",
       kAllShapes,
       "The class and selectors to match; with neither, every device.",
       {Str("className", "A DeviceClass whose selectors apply."),
        ListOf("selectors", "admin.DeviceSelector", "CEL selectors; a device must match all."),
        I32("limit", "Devices listed at most (default 500, at most 5000); counts cover all.")}},
      {"admin.DeviceSelector",
       kAllShapes,
       "One selector.",
       {Obj("cel", "admin.CELDeviceSelector", "A CEL expression over the device.")}},
      {"admin.CELDeviceSelector",
       kAllShapes,
       "A CEL expression over `device` (driver, attributes, capacity, allowMultipleAllocations).",
       {Req(Str("expression", "The expression; it must evaluate to a bool."))}},
      review("UtilizationHistoryReview",
             "Allocated, free and unhealthy devices over time, from the allocation history. "
             "Create-only; nothing is stored.",
             "The outcome: start, end, stepSeconds, times (each bucket's start, Unix seconds) "
             "and groups (name, devices and tainted now, per bucket allocated, peakAllocated, "
             "unhealthy, free)."),
      {"admin.UtilizationHistoryReviewSpec",
       kAllShapes,
       "The time range, bucket size and grouping.",
       {range, Time("start", "The start of the range (RFC 3339); not together with range."),
        Time("end", "The end of the range (RFC 3339); default now."),
        Str("step", "The bucket size as a duration; default a sixtieth of the range."),
        Str("groupBy",
            "One group for all devices (empty), or per class, model, node or "
            "namespace.")}},
      review("DeviceAllocationHistoryReview",
             "Who holds one device now and who held it before. Create-only; nothing is stored.",
             "The outcome: holders (claim, shareID, adminAccess), events (newest first: time, "
             "type Allocated or Released, claim, shareID, adminAccess), truncated, start and "
             "end."),
      {"admin.DeviceAllocationHistoryReviewSpec",
       kAllShapes,
       "The device and the time range.",
       {Req(Str("driver", "The device's driver.")), Req(Str("pool", "The device's pool.")),
        Req(Str("device", "The device's name within the pool.")), range,
        Time("start", "The start of the range (RFC 3339); default 7 days ago."),
        I32("limit", "Events listed at most (default 200, at most 5000).")}},
      review("DeviceHolderReview",
             "Who holds each device of the given pools now. Create-only; nothing is stored.",
             "The outcome: devices (driver, pool, device, holders: claim {namespace, name, uid}, "
             "request, shareID, consumedCapacity, adminAccess, consumers, "
             "claimCreationTimestamp, nodeName), sorted by driver, pool and device, "
             "heldDevices, and with spec.deviceClassName claims (namespace, name, uid, "
             "allocated; the first spec.limit), claimCount (every claim naming the class) and "
             "claimsTruncated."),
      {"admin.DeviceHolderReviewSpec",
       kAllShapes,
       "The pools whose devices to report; none: every held device.",
       {ListOf("pools", "admin.DevicePool", "Pools, at most 1000."),
        Str("deviceClassName",
            "Only the claims naming this device class (listed in status.claims, allocated or "
            "not) and the devices the listed ones hold."),
        I32("limit",
            "Claims listed at most in status.claims (default 500, at most 5000); only with "
            "deviceClassName.")}},
      {"admin.DevicePool",
       kAllShapes,
       "One pool of one driver.",
       {Req(Str("driver", "The driver.")), Req(Str("pool", "The pool's name."))}},
      {"admin.ClusterSummary", kAllShapes,
       "Computed, read-only (get, list, watch): one object named cluster with the node counts and "
       "the last change of the kinds the admin views count.",
       Cat(KindHead(),
           {Free("status",
                 "nodes (total, ready, notReady, unknown, unschedulable) and lastChanges "
                 "(per resource: nodes, resourceslices, resourceclaims, devicetaintrules, "
                 "deviceclasses, the resourceVersion of its newest change).")})},
  };
}

// One "<Kind>List" definition per served kind, in the shapes of the kind.
std::vector<Def> ListDefs(const std::vector<Def>& defs) {
  std::vector<Def> lists;
  for (const model::ResourceType& type : model::AllResourceTypes()) {
    const std::string id = PackageOf(type.group) + "." + type.kind;
    unsigned shapes = 0;
    for (const Def& d : defs) {
      if (d.id == id) shapes |= d.shapes;
    }
    if (shapes == 0) continue;
    lists.push_back(
        {id + "List",
         shapes,
         "A list of " + type.kind + " objects.",
         {ApiVersionProp(), KindProp(), Obj("metadata", "meta.ListMeta", "Standard list metadata."),
          Req(ListOf("items", id, "The " + type.kind + " objects."))}});
  }
  return lists;
}

std::vector<Def> BuildDefs() {
  std::vector<Def> defs = MetaDefs();
  for (auto* part : {&CoreDefs, &PodDefs, &ResourceDefs, &RbacDefs, &AdminDefs}) {
    std::vector<Def> more = part();
    defs.insert(defs.end(), std::make_move_iterator(more.begin()),
                std::make_move_iterator(more.end()));
  }
  std::vector<Def> lists = ListDefs(defs);
  defs.insert(defs.end(), std::make_move_iterator(lists.begin()),
              std::make_move_iterator(lists.end()));
  return defs;
}

}  // namespace

const std::vector<Def>& SchemaDefs() {
  static const auto* defs = new std::vector<Def>(BuildDefs());
  return *defs;
}

const Def* FindDef(const std::string& id, unsigned shape) {
  // Strict decoding looks definitions up once per nested object, so index them by id.
  static const auto* by_id = [] {
    auto* index = new std::map<std::string, std::vector<const Def*>>();
    for (const Def& d : SchemaDefs()) (*index)[d.id].push_back(&d);
    return index;
  }();
  auto it = by_id->find(id);
  if (it == by_id->end()) return nullptr;
  for (const Def* d : it->second) {
    if ((d->shapes & shape) != 0) return d;
  }
  return nullptr;
}

}  // namespace qm::api::schema_internal
