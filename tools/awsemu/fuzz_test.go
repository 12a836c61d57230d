package awsemu

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The fuzz targets drive the whole handler, decoders included, with a recorder: a panic would
// be turned into a 500 InternalError by the backstop, so any 500 is a failure.

func fuzzEmulator(f *testing.F) *Emulator {
	emu, err := New(Config{Clock: NewManualClock(epoch), PoolCapacity: 3})
	if err != nil {
		f.Fatal(err)
	}
	return emu
}

func FuzzEC2Form(f *testing.F) {
	for _, seed := range []string{
		"Action=DescribeInstances&MaxResults=5&Filter.1.Name=tag:a&Filter.1.Value.1=b*",
		"Action=DescribeInstanceTypes&InstanceType.1=m5.large",
		"Action=CreateFleet&Type=instant&TargetCapacitySpecification.TotalTargetCapacity=2&LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName=x&LaunchTemplateConfigs.1.Overrides.1.InstanceType=m5.large",
		"Action=CreateLaunchTemplate&LaunchTemplateName=abc&LaunchTemplateData.UserData=%%%",
		"Action=TerminateInstances&InstanceId.1=i-0123456789abcdef0",
		"Action=DescribeSpotPriceHistory&NextToken=tok-99999999999",
		"Action=DescribeImages&Filter.0.Name=name&Filter.999999999999.Value.1=*?*",
		"%zz", "",
	} {
		f.Add(seed)
	}
	emu := fuzzEmulator(f)
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		emu.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.String())
		}
	})
}

func FuzzSQSJSON(f *testing.F) {
	ops := []string{"CreateQueue", "GetQueueUrl", "SendMessage", "ReceiveMessage", "DeleteMessage",
		"ChangeMessageVisibility", "GetQueueAttributes", "PurgeQueue", "ListQueues", "DeleteQueue", "Nope"}
	for i, seed := range []string{
		`{"QueueName":"q"}`, `{"QueueName":"demo-cluster"}`, `{"QueueUrl":"http://h/123456789012/demo-cluster","MessageBody":"x"}`,
		`{"QueueUrl":"http://h/123456789012/demo-cluster","MaxNumberOfMessages":10,"WaitTimeSeconds":1,"AttributeNames":["All"]}`,
		`{"QueueUrl":"http://h/123456789012/demo-cluster","ReceiptHandle":"a#b"}`,
		`{"QueueUrl":"http://h/123456789012/demo-cluster","ReceiptHandle":"x","VisibilityTimeout":-1}`,
		`{"QueueUrl":"http://h/123456789012/demo-cluster","AttributeNames":["All","Bogus"]}`,
		`{"QueueUrl":"/"}`, `{`, `null`, `[]`,
	} {
		f.Add(uint8(i), seed)
	}
	emu := fuzzEmulator(f)
	f.Fuzz(func(t *testing.T, op uint8, body string) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)).WithContext(ctx)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", "AmazonSQS."+ops[int(op)%len(ops)])
		rec := httptest.NewRecorder()
		emu.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d for %s %q: %s", rec.Code, ops[int(op)%len(ops)], body, rec.Body.String())
		}
	})
}
