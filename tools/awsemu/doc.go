// Package awsemu is a small AWS emulator for Fleetwright's tests and demo: it answers the EC2
// query protocol (form POST, XML) and the SQS JSON 1.0 protocol over real HTTP, so that the
// launcher and terminator are exercised through the real aws-sdk-go-v2 clients with no AWS
// account.
//
//	SDK client ──HTTP──▶ Emulator.ServeHTTP ──┬─ X-Amz-Target: AmazonSQS.* ─▶ sqs.go
//	                                          ├─ form Action=...           ─▶ ec2_*.go
//	                                          └─ /_emu/...                 ─▶ admin.go (fault injection)
//	clock ticks ─▶ timers (boot, shutdown, spot notice) ─▶ Registrar ─▶ kube-apiserver (Nodes)
//
// Its instance catalog is the real one (package catalog), priced by its region's real prices;
// spot prices are modelled within the region's real ranges (catalog.RegionalSpotPriceModel) and
// labelled as such. All state lives behind one mutex; time comes
// from an injected Clock so that tests move it instead of sleeping. See README.md for the
// actions, the admin API and the allocation models.
package awsemu
