package awsemu

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
)

// BlockDevice is an EBS volume of a launch template (LaunchTemplateData.BlockDeviceMapping.N),
// as the emulator recorded it.
type BlockDevice struct {
	DeviceName          string `json:"deviceName"`
	VolumeSizeGiB       int32  `json:"volumeSize,omitempty"` // 0: not given
	VolumeType          string `json:"volumeType,omitempty"`
	IOPS                int32  `json:"iops,omitempty"`
	Throughput          int32  `json:"throughput,omitempty"`
	Encrypted           *bool  `json:"encrypted,omitempty"`
	DeleteOnTermination *bool  `json:"deleteOnTermination,omitempty"`
	KMSKeyID            string `json:"kmsKeyId,omitempty"`
	SnapshotID          string `json:"snapshotId,omitempty"`
}

var volumeTypes = []string{"standard", "io1", "io2", "gp2", "gp3", "sc1", "st1"}

// parseBlockDevices reads prefix.N.DeviceName and prefix.N.Ebs.* as EC2 does, refusing what
// EC2 refuses: a mapping without a device name, a device named twice, sizes, IOPS and
// throughput that are not positive integers, an unknown volume type.
func parseBlockDevices(f url.Values, prefix string) ([]BlockDevice, error) {
	var out []BlockDevice
	for _, n := range indices(f, prefix) {
		p := fmt.Sprintf("%s.%d.", prefix, n)
		d := BlockDevice{DeviceName: f.Get(p + "DeviceName"), VolumeType: f.Get(p + "Ebs.VolumeType"),
			KMSKeyID: f.Get(p + "Ebs.KmsKeyId"), SnapshotID: f.Get(p + "Ebs.SnapshotId")}
		if d.DeviceName == "" {
			return nil, &apiError{Status: 400, Code: "MissingParameter", Message: fmt.Sprintf("The request must contain the parameter %sDeviceName", p)}
		}
		if slices.ContainsFunc(out, func(o BlockDevice) bool { return o.DeviceName == d.DeviceName }) {
			return nil, errInvalidParameter("The device '%s' is used in more than one block-device mapping", d.DeviceName)
		}
		if d.VolumeType != "" && !slices.Contains(volumeTypes, d.VolumeType) {
			return nil, errInvalidParameter("Value (%s) for parameter volumeType is invalid. Valid values: %v", d.VolumeType, volumeTypes)
		}
		for _, field := range []struct {
			name string
			dst  *int32
			max  int64
		}{{"VolumeSize", &d.VolumeSizeGiB, 65536}, {"Iops", &d.IOPS, 256000}, {"Throughput", &d.Throughput, 4000}} {
			v := f.Get(p + "Ebs." + field.name)
			if v == "" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1 || n > field.max {
				return nil, errInvalidParameter("Value (%s) for parameter %s of device %s is invalid: want an integer from 1 to %d", v, field.name, d.DeviceName, field.max)
			}
			*field.dst = int32(n)
		}
		for _, field := range []struct {
			name string
			dst  **bool
		}{{"Encrypted", &d.Encrypted}, {"DeleteOnTermination", &d.DeleteOnTermination}} {
			v := f.Get(p + "Ebs." + field.name)
			if v == "" {
				continue
			}
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, errInvalidParameter("Value (%s) for parameter %s of device %s is invalid: want true or false", v, field.name, d.DeviceName)
			}
			*field.dst = &b
		}
		out = append(out, d)
	}
	return out, nil
}
