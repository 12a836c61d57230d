package apis_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/ec2/v1alpha1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1alpha5"
)

// Each API package's AddToScheme registers its kinds, and their lists, under its group version.
func TestAddToScheme(t *testing.T) {
	for _, c := range []struct {
		add   func(*runtime.Scheme) error
		gv    schema.GroupVersion
		kinds []runtime.Object
	}{
		{ec2v1.AddToScheme, ec2v1.SchemeGroupVersion, []runtime.Object{&ec2v1.EC2NodeClass{}, &ec2v1.EC2NodeClassList{}}},
		{v1alpha1.AddToScheme, v1alpha1.SchemeGroupVersion, []runtime.Object{&v1alpha1.AWSNodeTemplate{}, &v1alpha1.AWSNodeTemplateList{}}},
		{karpv1.AddToScheme, karpv1.SchemeGroupVersion, []runtime.Object{&karpv1.NodePool{}, &karpv1.NodePoolList{}, &karpv1.NodeClaim{}, &karpv1.NodeClaimList{}}},
		{v1alpha5.AddToScheme, v1alpha5.SchemeGroupVersion, []runtime.Object{&v1alpha5.Provisioner{}, &v1alpha5.ProvisionerList{}}},
	} {
		s := runtime.NewScheme()
		require.NoError(t, c.add(s))
		for _, want := range c.kinds {
			kind := reflect.TypeOf(want).Elem().Name()
			got, err := s.New(c.gv.WithKind(kind))
			require.NoError(t, err, kind)
			require.IsType(t, want, got)
		}
	}
}
