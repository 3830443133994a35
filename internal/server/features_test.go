package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/runnel-dev/runnel/internal/controller"
)

// TestFeatures: ApiVersions reports the command level as Kafka's features
// (runnel.command.level, supported up to this version's level, finalized at the cluster's);
// UpdateFeatures takes it to its level, refuses lowering it (whatever the downgrade type),
// raising it past this version's, unknown features and other levels of the fixed ones (v2 as
// a top-level error); runnel.command.level.auto is a cluster-wide broker config.
func TestFeatures(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	cl := b.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	level := int16(controller.Level)
	eventually(t, "the command level finalized at this version's", 20*time.Second, func() bool {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "runnel-test", "1" // KIP-511: a v3+ request names its client
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return false
		}
		sup := slices.ContainsFunc(resp.SupportedFeatures, func(f kmsg.ApiVersionsResponseSupportedFeature) bool {
			return f.Name == controller.LevelFeature && f.MinVersion == 0 && f.MaxVersion == level
		})
		fin := slices.ContainsFunc(resp.FinalizedFeatures, func(f kmsg.ApiVersionsResponseFinalizedFeature) bool {
			return f.Name == controller.LevelFeature && f.MinVersionLevel == level && f.MaxVersionLevel == level
		})
		group := slices.ContainsFunc(resp.FinalizedFeatures, func(f kmsg.ApiVersionsResponseFinalizedFeature) bool {
			return f.Name == "group.version" && f.MaxVersionLevel == 1
		})
		return sup && fin && group && resp.FinalizedFeaturesEpoch == 1+int64(level)
	})
	// Below ApiVersions v4 the supported features (all from level 0) are left out (KAFKA-17492).
	v3 := b.client(kgo.MaxVersions(kversion.V3_8_0()))
	if resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, v3); err != nil || resp.Version != 3 || len(resp.SupportedFeatures) != 0 ||
		!slices.ContainsFunc(resp.FinalizedFeatures, func(f kmsg.ApiVersionsResponseFinalizedFeature) bool { return f.Name == controller.LevelFeature }) {
		t.Fatalf("ApiVersions v3: %v; want supported features left out, finalized ones kept", err)
	}
	v1 := v3 // UpdateFeatures v1: per-feature results
	update := func(version int16, feature string, lvl int16, typ int8) *kmsg.UpdateFeaturesResponse {
		t.Helper()
		req := kmsg.NewPtrUpdateFeaturesRequest()
		c := cl
		if version < 2 {
			c = v1
		}
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType, u.AllowDowngrade = feature, lvl, typ, typ > 1
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		resp, err := req.RequestWith(ctx, c)
		if err != nil {
			t.Fatalf("UpdateFeatures %s=%d: %v", feature, lvl, err)
		}
		if resp.Version != version {
			t.Fatalf("UpdateFeatures answered at v%d; want v%d", resp.Version, version)
		}
		return resp
	}
	cases := []struct {
		feature string
		level   int16
		typ     int8
		want    *kerr.Error
		msg     string
	}{
		{controller.LevelFeature, level, 1, nil, ""},
		{controller.LevelFeature, level - 1, 3, kerr.InvalidUpdateVersion, "never lowered"},
		{controller.LevelFeature, level + 1, 1, kerr.InvalidUpdateVersion, "applies command level"},
		{controller.LevelFeature, level + 1, 2, kerr.InvalidUpdateVersion, "Can't downgrade to a newer version"},
		{"metadata.version", 27, 1, kerr.InvalidUpdateVersion, "no feature"},
		{"transaction.version", 2, 1, nil, ""},
		{"transaction.version", 1, 2, kerr.InvalidUpdateVersion, "keeps transaction.version at level 2"},
		{"group.version", 1, 1, nil, ""}, // KIP-848's, finalized as on a new Kafka 4.x cluster
	}
	for _, c := range cases {
		r := update(1, c.feature, c.level, c.typ)
		if len(r.Results) != 1 {
			t.Fatalf("v1 %s=%d: top-level %v %v, %d results", c.feature, c.level, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage, len(r.Results))
		}
		res := r.Results[0]
		msg := ""
		if res.ErrorMessage != nil {
			msg = *res.ErrorMessage
		}
		if kerr.ErrorForCode(res.ErrorCode) != kerr.ErrorForCode(codeOf(c.want)) || !strings.Contains(msg, c.msg) {
			t.Fatalf("v1 %s=%d: %v %q; want %v (%q)", c.feature, c.level, kerr.ErrorForCode(res.ErrorCode), msg, c.want, c.msg)
		}
	}
	if r := update(2, controller.LevelFeature, level-1, 2); r.ErrorCode != kerr.InvalidUpdateVersion.Code || r.ErrorMessage == nil ||
		!strings.Contains(*r.ErrorMessage, controller.LevelFeature) {
		t.Fatalf("v2 lowering: top-level %v %v; want INVALID_UPDATE_VERSION naming the feature", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	// All or nothing: one refusal answers every feature with it.
	req := kmsg.NewPtrUpdateFeaturesRequest()
	for _, f := range []string{controller.LevelFeature, "group.version"} {
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = f, level, 1
		req.FeatureUpdates = append(req.FeatureUpdates, u)
	}
	if r, err := req.RequestWith(ctx, v1); err != nil || len(r.Results) != 2 || r.Results[0].ErrorCode != kerr.InvalidUpdateVersion.Code ||
		r.Results[1].ErrorCode != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("two features, one unknown: %v %+v; want both answered INVALID_UPDATE_VERSION", err, r)
	}
	adm := kadm.NewClient(cl)
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: controller.AutoLevelConfig, Value: kmsg.StringPtr("false")}})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("set %s=false cluster-wide: %v %v", controller.AutoLevelConfig, err, rs)
	}
}

func codeOf(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}
