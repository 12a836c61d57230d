package v1

import "strings"

// InstanceID takes the EC2 instance id out of a provider id, aws:///<zone>/<instance-id>;
// empty for an empty provider id.
func InstanceID(providerID string) string {
	if providerID == "" {
		return ""
	}
	return providerID[strings.LastIndex(providerID, "/")+1:]
}
