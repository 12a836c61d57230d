// Package contract tests the generated Fleetwright message contracts in gen/: every top-level
// message survives binary and JSON round trips, is registered under its documented full name,
// and its fixture sets every field (so a field added later is covered or the test says so).
package contract

import (
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	interruptionv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/interruption/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
	nodesv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/nodes/v1"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
	schedulerv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/scheduler/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

func TestTopLevelMessagesRoundTrip(t *testing.T) {
	tests := []struct {
		fullName protoreflect.FullName
		msg      proto.Message
	}{
		{"fleetwright.pods.v1.PendingPodBatch", pendingPodBatch()},
		{"fleetwright.launch.v1.LaunchIntent", launchIntent()},
		{"fleetwright.launch.v1.LaunchResult", launchResult()},
		{"fleetwright.launch.v1.OfferingUnavailable", offeringUnavailable()},
		{"fleetwright.catalog.v1.Catalog", catalog()},
		{"fleetwright.nodes.v1.NodeEvent", nodeEvent()},
		{"fleetwright.interruption.v1.InterruptionEvent", interruptionEvent()},
		{"fleetwright.termination.v1.TerminationIntent", terminationIntent()},
		{"fleetwright.termination.v1.TerminationResult", terminationResult()},
		{"fleetwright.termination.v1.DisruptionDecision", disruptionDecision()},
		{"fleetwright.scheduler.v1.SimulateRequest", &schedulerv1.SimulateRequest{Pods: []*podsv1.PodProjection{podProjection()}}},
		{"fleetwright.scheduler.v1.SimulateResponse", simulateResponse()},
	}
	for _, tt := range tests {
		t.Run(string(tt.fullName), func(t *testing.T) {
			desc := tt.msg.ProtoReflect().Descriptor()
			if desc.FullName() != tt.fullName {
				t.Fatalf("full name = %q, want %q", desc.FullName(), tt.fullName)
			}
			mt, err := protoregistry.GlobalTypes.FindMessageByName(tt.fullName)
			if err != nil {
				t.Fatalf("finding %s in the global registry: %v", tt.fullName, err)
			}
			if mt.Descriptor() != desc {
				t.Fatalf("registry holds a different descriptor for %s", tt.fullName)
			}
			assertFullyPopulated(t, tt.msg.ProtoReflect())

			wire, err := proto.Marshal(tt.msg)
			if err != nil {
				t.Fatalf("marshaling: %v", err)
			}
			fromWire := mt.New().Interface()
			if err := proto.Unmarshal(wire, fromWire); err != nil {
				t.Fatalf("unmarshaling: %v", err)
			}
			if !proto.Equal(tt.msg, fromWire) {
				t.Errorf("binary round trip changed the message:\nsent %v\ngot  %v", tt.msg, fromWire)
			}

			js, err := protojson.Marshal(tt.msg)
			if err != nil {
				t.Fatalf("marshaling JSON: %v", err)
			}
			fromJSON := mt.New().Interface()
			if err := protojson.Unmarshal(js, fromJSON); err != nil {
				t.Fatalf("unmarshaling JSON %s: %v", js, err)
			}
			if !proto.Equal(tt.msg, fromJSON) {
				t.Errorf("JSON round trip changed the message:\nsent %v\ngot  %v", tt.msg, fromJSON)
			}
		})
	}
}

// Some fields mean different things when unset and when present but empty (a nil
// namespace_selector selects no namespaces, an empty one all; unset min_values means no
// minimum). Presence must survive both encodings.
func TestPresenceSurvivesRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		msg     proto.Message
		present func(proto.Message) bool
	}{
		{
			name: "empty namespace selector",
			msg:  &podsv1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", NamespaceSelector: &commonv1.LabelSelector{}},
			present: func(m proto.Message) bool {
				return m.(*podsv1.PodAffinityTerm).NamespaceSelector != nil
			},
		},
		{
			name: "min_values zero",
			msg:  &commonv1.NodeSelectorRequirement{Key: "k", Operator: "Exists", MinValues: ptr(int32(0))},
			present: func(m proto.Message) bool {
				return m.(*commonv1.NodeSelectorRequirement).MinValues != nil
			},
		},
		{
			name: "toleration_seconds zero",
			msg:  &commonv1.Toleration{Key: "k", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: ptr(int64(0))},
			present: func(m proto.Message) bool {
				return m.(*commonv1.Toleration).TolerationSeconds != nil
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wire, err := proto.Marshal(tt.msg)
			if err != nil {
				t.Fatalf("marshaling: %v", err)
			}
			fromWire := tt.msg.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(wire, fromWire); err != nil {
				t.Fatalf("unmarshaling: %v", err)
			}
			if !tt.present(fromWire) {
				t.Errorf("binary round trip lost presence: %v", fromWire)
			}
			js, err := protojson.Marshal(tt.msg)
			if err != nil {
				t.Fatalf("marshaling JSON: %v", err)
			}
			fromJSON := tt.msg.ProtoReflect().New().Interface()
			if err := protojson.Unmarshal(js, fromJSON); err != nil {
				t.Fatalf("unmarshaling JSON %s: %v", js, err)
			}
			if !tt.present(fromJSON) {
				t.Errorf("JSON round trip lost presence: %s", js)
			}
		})
	}
}

// assertFullyPopulated fails for each field of m, and of the messages it holds, that the
// fixture left unset. Of a oneof, one member set is enough.
func assertFullyPopulated(t *testing.T, m protoreflect.Message) {
	t.Helper()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if oo := fd.ContainingOneof(); oo != nil && !oo.IsSynthetic() {
			if m.WhichOneof(oo) == nil {
				t.Errorf("%s: no member of oneof %s set", m.Descriptor().FullName(), oo.Name())
			}
			if !m.Has(fd) {
				continue
			}
		}
		if !m.Has(fd) {
			t.Errorf("%s: fixture leaves field %s unset", m.Descriptor().FullName(), fd.Name())
			continue
		}
		if fd.Message() == nil || fd.IsMap() || isWellKnown(fd.Message()) {
			continue
		}
		if fd.IsList() {
			list := m.Get(fd).List()
			for j := range list.Len() {
				assertFullyPopulated(t, list.Get(j).Message())
			}
			continue
		}
		assertFullyPopulated(t, m.Get(fd).Message())
	}
}

func isWellKnown(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile().Package() == "google.protobuf"
}

// Fixtures: every field set, with values shaped like the real thing.

var (
	t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 = t0.Add(1500 * time.Millisecond)
)

func ptr[T any](v T) *T { return &v }

func resources() *commonv1.Resources {
	return &commonv1.Resources{Quantities: map[string]int64{
		"cpu":            1500,
		"memory":         2 << 30,
		"nvidia.com/gpu": 1,
	}}
}

func requirement() *commonv1.NodeSelectorRequirement {
	return &commonv1.NodeSelectorRequirement{
		Key:       "node.kubernetes.io/instance-type",
		Operator:  "In",
		Values:    []string{"m5.large", "m5.xlarge"},
		MinValues: ptr(int32(2)),
	}
}

func taint() *commonv1.Taint {
	return &commonv1.Taint{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}
}

func selector() *commonv1.LabelSelector {
	return &commonv1.LabelSelector{
		MatchLabels: map[string]string{"app": "inflate"},
		MatchExpressions: []*commonv1.LabelSelectorRequirement{
			{Key: "tier", Operator: "NotIn", Values: []string{"batch"}},
		},
	}
}

func podRef() *commonv1.PodRef {
	return &commonv1.PodRef{Namespace: "default", Name: "inflate-7d9f-abcde", Uid: "3f0c9a52-uid"}
}

func offering() *catalogv1.Offering {
	return &catalogv1.Offering{
		Zone:            "us-east-1a",
		CapacityType:    commonv1.CapacityType_CAPACITY_TYPE_SPOT,
		PriceUsdPerHour: 0.0384,
		Available:       true,
		PriceIsModelled: true,
	}
}

func instanceTypeOption() *launchv1.InstanceTypeOption {
	return &launchv1.InstanceTypeOption{Name: "m5.large", Offerings: []*catalogv1.Offering{offering()}}
}

func affinityTerm() *podsv1.PodAffinityTerm {
	return &podsv1.PodAffinityTerm{
		LabelSelector:     selector(),
		Namespaces:        []string{"default"},
		NamespaceSelector: selector(),
		TopologyKey:       "topology.kubernetes.io/zone",
		MatchLabelKeys:    []string{"pod-template-hash"},
		MismatchLabelKeys: []string{"tenant"},
	}
}

func podAffinity() *podsv1.PodAffinity {
	return &podsv1.PodAffinity{
		Required:  []*podsv1.PodAffinityTerm{affinityTerm()},
		Preferred: []*podsv1.WeightedPodAffinityTerm{{Weight: 50, Term: affinityTerm()}},
	}
}

func nodeSelectorTerm() *commonv1.NodeSelectorTerm {
	return &commonv1.NodeSelectorTerm{
		MatchExpressions: []*commonv1.NodeSelectorRequirement{requirement()},
		MatchFields: []*commonv1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: "NotIn", Values: []string{"node-a"}, MinValues: ptr(int32(1))},
		},
	}
}

func podProjection() *podsv1.PodProjection {
	return &podsv1.PodProjection{
		Namespace:            "default",
		Name:                 "inflate-7d9f-abcde",
		Uid:                  "3f0c9a52-uid",
		CreationTime:         timestamppb.New(t0),
		Labels:               map[string]string{"app": "inflate"},
		Requests:             resources(),
		NodeSelector:         map[string]string{"karpenter.sh/capacity-type": "spot"},
		RequiredNodeAffinity: []*commonv1.NodeSelectorTerm{nodeSelectorTerm()},
		PreferredNodeAffinity: []*podsv1.PreferredSchedulingTerm{
			{Weight: 10, Preference: nodeSelectorTerm()},
		},
		PodAffinity:     podAffinity(),
		PodAntiAffinity: podAffinity(),
		Tolerations: []*commonv1.Toleration{
			{Key: "dedicated", Operator: "Equal", Value: "gpu", Effect: "NoExecute", TolerationSeconds: ptr(int64(300))},
		},
		TopologySpreadConstraints: []*podsv1.TopologySpreadConstraint{{
			MaxSkew:            1,
			TopologyKey:        "topology.kubernetes.io/zone",
			WhenUnsatisfiable:  "DoNotSchedule",
			LabelSelector:      selector(),
			MinDomains:         ptr(int32(3)),
			NodeAffinityPolicy: "Honor",
			NodeTaintsPolicy:   "Ignore",
			MatchLabelKeys:     []string{"pod-template-hash"},
		}},
		Owner: &podsv1.OwnerReference{
			ApiVersion: "apps/v1", Kind: "ReplicaSet", Name: "inflate-7d9f", Uid: "rs-uid", Controller: true,
		},
		VolumeRequirements: []*podsv1.VolumeRequirement{{
			VolumeName:   "data",
			ClaimName:    "data-inflate-0",
			Source:       "PersistentVolume",
			Requirements: []*commonv1.NodeSelectorRequirement{requirement()},
		}},
		Priority:               1000,
		PriorityClassName:      "high",
		HostPorts:              []*podsv1.HostPort{{Port: 8080, Protocol: "TCP", HostIp: "0.0.0.0"}},
		NominatedNodeClaimName: "default-x7k2p",
		NominatedAt:            timestamppb.New(t0),
	}
}

func pendingPodBatch() *podsv1.PendingPodBatch {
	return &podsv1.PendingPodBatch{
		BatchId:         "b-5f2c",
		WindowOpenTime:  timestamppb.New(t0),
		WindowCloseTime: timestamppb.New(t1),
		WatcherId:       "pod-watcher-0",
		Pods:            []*podsv1.PodProjection{podProjection()},
	}
}

func launchIntent() *launchv1.LaunchIntent {
	return &launchv1.LaunchIntent{
		NodeClaimName: "default-x7k2p",
		NodeClaimUid:  "nc-uid",
		NodePoolName:  "default",
		NodeClassRef: &commonv1.ObjectRef{
			Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Namespace: "none", Name: "default", Uid: "ncl-uid",
		},
		InstanceTypes: []*launchv1.InstanceTypeOption{instanceTypeOption()},
		Zones:         []string{"us-east-1a", "us-east-1b"},
		CapacityTypes: []commonv1.CapacityType{commonv1.CapacityType_CAPACITY_TYPE_SPOT, commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND},
		Requirements:  []*commonv1.NodeSelectorRequirement{requirement()},
		Labels:        map[string]string{"karpenter.sh/nodepool": "default"},
		Taints:        []*commonv1.Taint{taint()},
		StartupTaints: []*commonv1.Taint{{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: "NoExecute"}},
		Resources:     resources(),
		Pods:          []*commonv1.PodRef{podRef()},
		Kubelet: &launchv1.KubeletConfig{
			MaxPods:                     ptr(int32(110)),
			PodsPerCore:                 ptr(int32(10)),
			SystemReserved:              map[string]string{"cpu": "100m"},
			KubeReserved:                map[string]string{"memory": "200Mi"},
			EvictionHard:                map[string]string{"memory.available": "5%"},
			EvictionSoft:                map[string]string{"memory.available": "10%"},
			EvictionSoftGracePeriod:     map[string]string{"memory.available": "1m30s"},
			EvictionMaxPodGracePeriod:   ptr(int32(60)),
			ImageGcHighThresholdPercent: ptr(int32(85)),
			ImageGcLowThresholdPercent:  ptr(int32(80)),
			CpuCfsQuota:                 ptr(true),
			ClusterDns:                  []string{"10.100.0.10"},
		},
		CreateTime: timestamppb.New(t0),
		BatchId:    "batch-1",
	}
}

func launchResult() *launchv1.LaunchResult {
	return &launchv1.LaunchResult{
		NodeClaimName:      "default-x7k2p",
		NodeClaimUid:       "nc-uid",
		NodePoolName:       "default",
		Outcome:            launchv1.LaunchOutcome_LAUNCH_OUTCOME_FAILED,
		InstanceId:         "i-0aaaaaaaaaaaaaaa1",
		ProviderId:         "aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1",
		InstanceType:       "m5.large",
		Zone:               "us-east-1a",
		CapacityType:       commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND,
		ImageId:            "ami-0123456789abcdef0",
		LaunchTemplateName: "fleetwright/default/abc123",
		ErrorCode:          "InsufficientInstanceCapacity",
		ErrorMessage:       "We currently do not have sufficient m5.xlarge capacity",
		Attempt:            2,
		CompleteTime:       timestamppb.New(t1),
	}
}

func offeringUnavailable() *launchv1.OfferingUnavailable {
	return &launchv1.OfferingUnavailable{
		InstanceType:  "m5.xlarge",
		Zone:          "us-east-1b",
		CapacityType:  commonv1.CapacityType_CAPACITY_TYPE_SPOT,
		Reason:        "InsufficientInstanceCapacity",
		ObserveTime:   timestamppb.New(t0),
		Ttl:           durationpb.New(3 * time.Minute),
		ExpireTime:    timestamppb.New(t0.Add(3 * time.Minute)),
		NodeClaimName: "default-x7k2p",
	}
}

func catalog() *catalogv1.Catalog {
	return &catalogv1.Catalog{
		GenerateTime: timestamppb.New(t0),
		Region:       "us-east-1",
		InstanceTypes: []*catalogv1.InstanceType{{
			Name:                         "g4dn.xlarge",
			Family:                       "g4dn",
			Category:                     "g",
			Generation:                   4,
			Size:                         "xlarge",
			Vcpu:                         4,
			MemoryMib:                    16384,
			Architecture:                 "amd64",
			OperatingSystems:             []string{"linux"},
			Hypervisor:                   "nitro",
			CpuManufacturer:              "intel",
			GpuCount:                     1,
			GpuManufacturer:              "nvidia",
			GpuName:                      "t4",
			GpuMemoryMib:                 16384,
			AcceleratorCount:             1,
			AcceleratorManufacturer:      "aws",
			AcceleratorName:              "inferentia",
			LocalNvmeGib:                 125,
			NetworkBandwidthMbps:         5000,
			EbsBandwidthMbps:             3500,
			MaxEnis:                      3,
			Ipv4PerEni:                   10,
			MaxPods:                      29,
			BareMetal:                    true,
			Burstable:                    true,
			Offerings:                    []*catalogv1.Offering{offering()},
			CpuSustainedClockSpeedMhz:    3100,
			EncryptionInTransitSupported: true,
		}},
		Source: "shared/data/instance-types.json; spot prices modelled",
	}
}

func nodeEvent() *nodesv1.NodeEvent {
	return &nodesv1.NodeEvent{
		Kind:          nodesv1.NodeEventKind_NODE_EVENT_KIND_INITIALIZED,
		NodeName:      "ip-10-0-1-23.ec2.internal",
		NodeClaimName: "default-x7k2p",
		ProviderId:    "aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1",
		InstanceId:    "i-0aaaaaaaaaaaaaaa1",
		NodePoolName:  "default",
		EventTime:     timestamppb.New(t1),
		Labels:        map[string]string{"node.kubernetes.io/instance-type": "m5.large"},
		Taints:        []*commonv1.Taint{taint()},
	}
}

func interruptionEvent() *interruptionv1.InterruptionEvent {
	return &interruptionv1.InterruptionEvent{
		Kind:                commonv1.InterruptionKind_INTERRUPTION_KIND_SCHEDULED_CHANGE,
		InstanceId:          "i-12345678",
		SqsMessageId:        "msg-1",
		EventId:             "7fb65329-0000",
		EventTime:           timestamppb.New(t0),
		Source:              "aws.health",
		DetailType:          "AWS Health Event",
		State:               "stopping",
		HealthEventTypeCode: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
		NodeName:            "ip-10-0-1-23.ec2.internal",
		NodeClaimName:       "default-x7k2p",
		ReceiveTime:         timestamppb.New(t1),
	}
}

func terminationIntent() *terminationv1.TerminationIntent {
	return &terminationv1.TerminationIntent{
		IntentId:                  "default-x7k2p/underutilized",
		NodeClaimName:             "default-x7k2p",
		NodeName:                  "ip-10-0-1-23.ec2.internal",
		InstanceId:                "i-0aaaaaaaaaaaaaaa1",
		ProviderId:                "aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1",
		NodePoolName:              "default",
		Reason:                    commonv1.TerminationReason_TERMINATION_REASON_UNDERUTILIZED,
		Voluntary:                 true,
		RequestTime:               timestamppb.New(t0),
		GracePeriod:               durationpb.New(2 * time.Minute),
		Why:                       "pods fit on one cheaper node (saves $0.05/h)",
		ReplacementNodeClaimNames: []string{"default-q9r4t"},
		InterruptionEventId:       "7fb65329-0000",
	}
}

func terminationResult() *terminationv1.TerminationResult {
	return &terminationv1.TerminationResult{
		IntentId:        "default-x7k2p/underutilized",
		NodeClaimName:   "default-x7k2p",
		NodeName:        "ip-10-0-1-23.ec2.internal",
		InstanceId:      "i-0aaaaaaaaaaaaaaa1",
		Reason:          commonv1.TerminationReason_TERMINATION_REASON_UNDERUTILIZED,
		Outcome:         terminationv1.TerminationOutcome_TERMINATION_OUTCOME_FAILED,
		PodsEvicted:     4,
		EvictionRetries: 2,
		DrainDuration:   durationpb.New(12 * time.Second),
		Error:           "terminating instance: RequestLimitExceeded",
		CompleteTime:    timestamppb.New(t1),
	}
}

func disruptionDecision() *terminationv1.DisruptionDecision {
	return &terminationv1.DisruptionDecision{
		DecisionId:                "5f0c6a52-0000/underutilized/1795539600/decided",
		Kind:                      terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_DECIDED,
		Reason:                    commonv1.TerminationReason_TERMINATION_REASON_UNDERUTILIZED,
		Action:                    terminationv1.DisruptionAction_DISRUPTION_ACTION_REPLACE,
		NodeClaimNames:            []string{"default-x7k2p"},
		NodeNames:                 []string{"ip-10-0-1-23.ec2.internal"},
		ReplacementNodeClaimNames: []string{"default-q9r4t"},
		NodePoolNames:             []string{"default"},
		Why:                       "pods fit on one cheaper node (saves $0.05/h)",
		SavingsUsdPerHour:         0.05,
		DecidedAt:                 timestamppb.New(t0),
	}
}

func simulateResponse() *schedulerv1.SimulateResponse {
	return &schedulerv1.SimulateResponse{
		NodeClaims: []*schedulerv1.SimulatedNodeClaim{{NodePoolName: "default",
			InstanceTypes: []*schedulerv1.SimulatedInstanceType{{Name: "m5.large", Offerings: []*catalogv1.Offering{offering()}}},
			Pods:          []*commonv1.PodRef{podRef()}, PriceUsdPerHour: 0.096, Requests: resources()}},
		Placements:      []*schedulerv1.SimulatedPlacement{{Pod: podRef(), Node: "ip-10-0-0-1.ec2.internal"}},
		Unschedulable:   []*schedulerv1.SimulatedUnschedulable{{Pod: podRef(), Reason: "nodepool default: did not tolerate taint"}},
		PriceUsdPerHour: 0.096,
		AnsweredBy:      "scheduler-0",
	}
}
