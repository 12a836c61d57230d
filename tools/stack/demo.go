package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetwright/fleetwright/tools/localcluster"
)

// demo brings the stack up and plays the getting-started scale-up, printing each step and its
// time. Until the launcher exists, the node the pods land on is registered by the demo itself
// (a kwok node shaped like an m5.2xlarge) and the output says so.
func demo(ctx context.Context, cfg config) error {
	if err := up(ctx, cfg); err != nil {
		return err
	}
	kubeconfig := filepath.Join(cfg.clusterDir(), "kubeconfig")
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	kubectl := func(args ...string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(localcluster.BinDir(), localcluster.Kubectl), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kubectl %v: %w", args, err)
		}
		return nil
	}
	timeout := time.Duration(cfg.demoTimeout) * time.Second
	start := time.Now()
	step := func(what string, cond func() (string, bool)) error {
		t0 := time.Now()
		last := ""
		for {
			msg, ok := cond()
			if msg != last {
				fmt.Printf("  … %s\n", msg)
				last = msg
			}
			if ok {
				fmt.Printf("✓ %s (%.1fs, %.1fs since start)\n", what, time.Since(t0).Seconds(), time.Since(start).Seconds())
				return nil
			}
			if time.Since(t0) > timeout {
				return fmt.Errorf("%s: not done after %s (last: %s)", what, timeout, msg)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	countPods := func(pred func(corev1.Pod) bool) int {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=inflate"})
		if err != nil {
			return 0
		}
		n := 0
		for _, p := range pods.Items {
			if pred(p) {
				n++
			}
		}
		return n
	}
	fmt.Println("\n== demo: the getting-started scale-up ==")
	if err := kubectl("apply", "-f", "deploy/examples/inflate.yaml"); err != nil {
		return err
	}
	if err := kubectl("scale", "deployment", "inflate", "--replicas", "5"); err != nil {
		return err
	}
	if err := step("5 inflate pods pending (PodScheduled=False/Unschedulable)", func() (string, bool) {
		n := countPods(isUnschedulable)
		return fmt.Sprintf("%d/5 pods unschedulable", n), n == 5
	}); err != nil {
		return err
	}
	fmt.Println("  (the launcher is not in this build yet: the demo registers one kwok node itself)")
	if err := registerDemoNode(ctx, client); err != nil {
		return err
	}
	if err := step("node demo-node-1 Ready (kwok plays its kubelet)", func() (string, bool) {
		n, err := client.CoreV1().Nodes().Get(ctx, "demo-node-1", metav1.GetOptions{})
		if err != nil {
			return err.Error(), false
		}
		return "node registered, waiting for Ready", nodeReady(n)
	}); err != nil {
		return err
	}
	if err := step("5 inflate pods Running", func() (string, bool) {
		n := countPods(func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		return fmt.Sprintf("%d/5 pods running", n), n == 5
	}); err != nil {
		return err
	}
	_ = kubectl("get", "nodes,pods", "-o", "wide")
	fmt.Printf("\nDemo done in %.1fs. The stack stays up: `. %s` then kubectl; `make down` stops it.\n", time.Since(start).Seconds(), cfg.envFile())
	return nil
}

func registerDemoNode(ctx context.Context, client kubernetes.Interface) error {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("58")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "demo-node-1",
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{"kubernetes.io/hostname": "demo-node-1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"node.kubernetes.io/instance-type": "m5.2xlarge", "topology.kubernetes.io/zone": "us-east-1a"},
		},
		Spec:   corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0demo0000000000001"},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !isAlreadyExists(err) {
		return fmt.Errorf("registering demo node: %w", err)
	}
	return nil
}

func isUnschedulable(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }
