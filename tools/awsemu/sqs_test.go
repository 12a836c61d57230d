package awsemu

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func (e *env) queueURL(t testing.TB, name string) string {
	t.Helper()
	out, err := e.sqs.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	require.NoError(t, err)
	return *out.QueueUrl
}

func TestSQSVisibilityRedeliveryAndDelete(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	_, err := e.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("missing")})
	var missing *sqstypes.QueueDoesNotExist
	require.True(t, errors.As(err, &missing), "typed QueueDoesNotExist, got %v", err)

	created, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("work")})
	require.NoError(t, err)
	q := *created.QueueUrl
	assert.Equal(t, q, e.queueURL(t, "work"))

	sent, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(`{"hello":"world"}`)})
	require.NoError(t, err, "the SDK checks MD5OfMessageBody")
	sum := md5.Sum([]byte(`{"hello":"world"}`))
	assert.Equal(t, hex.EncodeToString(sum[:]), *sent.MD5OfMessageBody)

	receive := func() []sqstypes.Message {
		out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 10,
			VisibilityTimeout: 30, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"}})
		require.NoError(t, err, "the SDK checks MD5OfBody")
		return out.Messages
	}
	first := receive()
	require.Len(t, first, 1)
	assert.Equal(t, "1", first[0].Attributes["ApproximateReceiveCount"])
	assert.Equal(t, `{"hello":"world"}`, *first[0].Body)
	assert.Empty(t, receive(), "invisible while in flight")

	e.clock.Advance(31 * time.Second)
	second := receive()
	require.Len(t, second, 1, "redelivered after the visibility timeout")
	assert.Equal(t, "2", second[0].Attributes["ApproximateReceiveCount"])
	assert.Equal(t, *first[0].MessageId, *second[0].MessageId)

	// An outdated handle succeeds and deletes nothing, as SQS documents.
	_, err = e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: first[0].ReceiptHandle})
	require.NoError(t, err)
	attrs, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q),
		AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessagesNotVisible"}})
	require.NoError(t, err)
	assert.Equal(t, "1", attrs.Attributes["ApproximateNumberOfMessagesNotVisible"])

	_, err = e.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q), ReceiptHandle: second[0].ReceiptHandle, VisibilityTimeout: 0})
	require.NoError(t, err)
	third := receive()
	require.Len(t, third, 1, "visible again at once")
	_, err = e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: third[0].ReceiptHandle})
	require.NoError(t, err)
	e.clock.Advance(time.Minute)
	assert.Empty(t, receive(), "deleted for good")

	_, err = e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: aws.String("bogus")})
	var invalid *sqstypes.ReceiptHandleIsInvalid
	assert.True(t, errors.As(err, &invalid), "got %v", err)

	for range 3 {
		_, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("x")})
		require.NoError(t, err)
	}
	_, err = e.sqs.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(q)})
	require.NoError(t, err)
	assert.Empty(t, receive())

	_, err = e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 11})
	assert.Equal(t, "InvalidParameterValue", apiCode(t, err))
}

func TestSQSLongPolling(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	q := e.queueURL(t, "fleetwright-demo-cluster")
	got := make(chan []sqstypes.Message, 1)
	go func() {
		out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), WaitTimeSeconds: 20, MaxNumberOfMessages: 1})
		if err != nil {
			got <- nil
			return
		}
		got <- out.Messages
	}()
	require.Eventually(t, func() bool {
		e.emu.mu.Lock()
		defer e.emu.mu.Unlock()
		return e.emu.queues["fleetwright-demo-cluster"].waiting > 0
	}, 10*time.Second, 5*time.Millisecond, "the long poll is waiting")
	_, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("late")})
	require.NoError(t, err)
	msgs := <-got
	require.Len(t, msgs, 1, "the waiting poll got the message sent after it started")
	assert.Equal(t, "late", *msgs[0].Body)

	// A poll with nothing to receive ends when its wait has passed on the emulator's clock.
	empty := make(chan int, 1)
	go func() {
		out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), WaitTimeSeconds: 20})
		if err != nil {
			empty <- -1
			return
		}
		empty <- len(out.Messages)
	}()
	require.Eventually(t, func() bool {
		e.clock.Advance(time.Second)
		select {
		case n := <-empty:
			assert.Equal(t, 0, n)
			return true
		default:
			return false
		}
	}, 10*time.Second, 10*time.Millisecond)
}

func TestInterruptionEventShapes(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.BootDelay = time.Second })
	ctx := context.Background()
	img := e.image(t, "amazon-eks-node-al2023-x86_64-standard-1.32-*")
	e.template(t, "fw-lt", img, "")
	ids := e.launch(t, e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeSpot, 1, ov{"m5.large", "us-east-1b"}))
	require.Len(t, ids, 1)
	id := ids[0]
	zone := e.instance(t, id).Zone
	e.clock.Advance(2 * time.Second)
	q := e.queueURL(t, "fleetwright-demo-cluster")

	tests := []struct {
		in         Interruption
		source     string
		detailType string
		resources  []string
		detail     map[string]any
	}{
		{Interruption{Kind: KindSpotInterruption, InstanceID: id}, "aws.ec2", "EC2 Spot Instance Interruption Warning",
			[]string{"arn:aws:ec2:" + zone + ":instance/" + id}, map[string]any{"instance-id": id, "instance-action": "terminate"}},
		{Interruption{Kind: KindRebalance, InstanceID: id}, "aws.ec2", "EC2 Instance Rebalance Recommendation",
			[]string{"arn:aws:ec2:" + zone + ":instance/" + id}, map[string]any{"instance-id": id}},
		{Interruption{Kind: KindStateChange, InstanceID: id, State: "stopping"}, "aws.ec2", "EC2 Instance State-change Notification",
			[]string{"arn:aws:ec2:us-east-1:123456789012:instance/" + id}, map[string]any{"instance-id": id, "state": "stopping"}},
		{Interruption{Kind: KindScheduledChange, InstanceID: id}, "aws.health", "AWS Health Event",
			[]string{id}, map[string]any{"service": "EC2", "eventTypeCategory": "scheduledChange",
				"eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", "affectedEntities": []any{map[string]any{"entityValue": id}}}},
	}
	for _, tc := range tests {
		t.Run(tc.in.Kind, func(t *testing.T) {
			require.NoError(t, e.emu.Interrupt(tc.in))
			out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 10})
			require.NoError(t, err)
			require.Len(t, out.Messages, 1)
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(*out.Messages[0].Body), &ev))
			assert.Equal(t, "0", ev["version"])
			assert.Equal(t, tc.source, ev["source"])
			assert.Equal(t, tc.detailType, ev["detail-type"])
			assert.Equal(t, "123456789012", ev["account"])
			assert.Equal(t, "us-east-1", ev["region"])
			assert.Equal(t, "2026-01-01T00:00:02Z", ev["time"])
			assert.NotEmpty(t, ev["id"])
			var res []string
			for _, r := range ev["resources"].([]any) {
				res = append(res, r.(string))
			}
			assert.Equal(t, tc.resources, res)
			detail := ev["detail"].(map[string]any)
			for k, v := range tc.detail {
				assert.Equal(t, v, detail[k], k)
			}
			_, err = e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: out.Messages[0].ReceiptHandle})
			require.NoError(t, err)
		})
	}
	// The spot warning terminates the instance after the two-minute notice.
	assert.Equal(t, StateRunning, e.instance(t, id).State)
	e.clock.Advance(2*time.Minute + 10*time.Second)
	out, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	require.NoError(t, err)
	assert.Equal(t, ec2types.InstanceStateNameTerminated, out.Reservations[0].Instances[0].State.Name)
	assert.Error(t, e.emu.Interrupt(Interruption{Kind: "meteor", InstanceID: id}))
}

// post sends a raw request, for input the SDK would never produce.
func post(t *testing.T, url, target, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestMalformedRequestsGetClearErrorsAndTheServerKeepsServing(t *testing.T) {
	e := newEnv(t, nil)
	form := "application/x-www-form-urlencoded"
	tests := []struct {
		name, target, contentType, body string
		status                          int
		contains                        string
	}{
		{"bad form", "", form, "Action=DescribeInstances&%zz", 400, "MalformedQueryString"},
		{"no action", "", form, "Version=2016-11-15", 400, "MissingAction"},
		{"unknown EC2 action", "", form, "Action=LaunchRockets&Version=2016-11-15", 400, "<Code>InvalidAction</Code>"},
		{"bad JSON", "AmazonSQS.SendMessage", "application/x-amz-json-1.0", `{"QueueUrl":`, 400, "SerializationException"},
		{"wrong JSON types", "AmazonSQS.ReceiveMessage", "application/x-amz-json-1.0", `{"MaxNumberOfMessages":"ten"}`, 400, "SerializationException"},
		{"unknown SQS operation", "AmazonSQS.FlyAway", "application/x-amz-json-1.0", `{}`, 400, "UnknownOperationException"},
		{"huge page size", "", form, "Action=DescribeInstances&MaxResults=99999999999999999999", 400, "InvalidParameterValue"},
		{"huge body", "", form, "Action=DescribeInstances&x=" + strings.Repeat("a", maxBodyBytes+10), 413, "RequestEntityTooLarge"},
		{"filter without name", "", form, "Action=DescribeInstances&Filter.1.Value.1=x", 400, "is invalid"},
		{"fleet without capacity", "", form, "Action=CreateFleet&Type=instant", 400, "TotalTargetCapacity"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, e.url, tc.target, tc.contentType, tc.body)
			assert.Equal(t, tc.status, status, body)
			assert.Contains(t, body, tc.contains)
		})
	}
	_, err := e.ec2.DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{})
	require.NoError(t, err, "still serving")
	_, err = url.Parse(e.url)
	require.NoError(t, err)
}
