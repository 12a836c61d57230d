package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
)

// SQSAPI is the slice of SQS the interruption poller uses; *sqs.Client satisfies it.
type SQSAPI interface {
	GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// EC2API is the slice of EC2 the terminator uses — terminating, and finding what to terminate;
// *ec2.Client satisfies it. The launcher's is the launching slice: neither does the other's work.
type EC2API interface {
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
}

// nodePoolTag is on every instance the launcher starts. With the cluster tag it marks an
// instance as Fleetwright's: the instances of an EKS managed node group carry
// kubernetes.io/cluster/<name> too, and are never the terminator's to end.
const nodePoolTag = "karpenter.sh/nodepool"

// errNotOwned is a refusal to terminate an instance that is not this cluster's Fleetwright's;
// retrying cannot change it.
var errNotOwned = errors.New("not tagged as this cluster's node pool instance")

// owned reports whether tags mark an instance as one this cluster's Fleetwright launched:
// kubernetes.io/cluster/<cluster>=owned and a karpenter.sh/nodepool tag, as the IAM policy
// requires. The pool tag may be empty: a NodeClaim made by hand belongs to no pool, and its
// instance is tagged karpenter.sh/nodepool="" (as Karpenter tags it, and as the policy's
// "karpenter.sh/nodepool": "*" condition allows).
func owned(tags []ec2types.Tag, cluster string) bool {
	return cluster != "" && tag(tags, "kubernetes.io/cluster/"+cluster) == "owned" && hasTag(tags, nodePoolTag)
}

// hasTag reports whether tags have the key, whatever its value.
func hasTag(tags []ec2types.Tag, key string) bool {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return true
		}
	}
	return false
}

// checkOwned describes the instance and returns an error wrapping errNotOwned unless it is this
// cluster's (see owned); gone reports an instance EC2 no longer knows.
func checkOwned(ctx context.Context, api EC2API, cluster, id string) (gone bool, err error) {
	inst, err := describeInstance(ctx, api, id)
	if err != nil || inst == nil {
		return inst == nil && err == nil, err
	}
	if !owned(inst.Tags, cluster) {
		return false, fmt.Errorf("refusing to terminate instance %s: %w (kubernetes.io/cluster/%s=owned and %s; a managed node group's or another tool's?)",
			id, errNotOwned, cluster, nodePoolTag)
	}
	return false, nil
}

// describeInstance is EC2's description of one instance; nil if EC2 no longer knows it.
func describeInstance(ctx context.Context, api EC2API, id string) (*ec2types.Instance, error) {
	out, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	var ae smithy.APIError
	if err != nil && errors.As(err, &ae) && ae.ErrorCode() == "InvalidInstanceID.NotFound" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describing instance %s: %w", id, err)
	}
	for _, res := range out.Reservations {
		for i := range res.Instances {
			if aws.ToString(res.Instances[i].InstanceId) == id {
				return &res.Instances[i], nil
			}
		}
	}
	return nil, nil
}

// terminateInstance terminates one instance of this cluster's (see owned), and refuses any
// other; one that no longer exists counts as done.
func terminateInstance(ctx context.Context, api EC2API, cluster, id string) error {
	if id == "" {
		return nil
	}
	if gone, err := checkOwned(ctx, api, cluster, id); gone || err != nil {
		return err
	}
	_, err := api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	var ae smithy.APIError
	if err != nil && errors.As(err, &ae) && ae.ErrorCode() == "InvalidInstanceID.NotFound" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("terminating instance %s: %w", id, err)
	}
	return nil
}
