package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
)

func init() {
	register(kmsg.UpdateFeatures, 0, 2, handleUpdateFeatures)
}

// fixedFeatures are the features Runnel finalizes at one level (ApiVersions): Kafka 4.x
// clients' transactions (KIP-890), the consumer rebalance protocol (KIP-848, group.version 1,
// finalized on a new Kafka 4.x cluster), share groups (KIP-932) and streams groups (KIP-1071).
var fixedFeatures = []struct {
	name string
	max  int16
}{{"transaction.version", 2}, {"group.version", 1}, {"share.version", 1}, {"streams.version", 1}}

// features fills ApiVersions v3+'s features: the fixed ones, and the command level
// (controller.LevelFeature: supported up to this version's level, finalized at the cluster's).
func (b *Broker) features(resp *kmsg.ApiVersionsResponse) {
	level := int16(b.cl.Image().Level)
	resp.SupportedFeatures = resp.SupportedFeatures[:0]
	resp.FinalizedFeatures = resp.FinalizedFeatures[:0]
	// Every feature here is supported from level 0, which clients before ApiVersions v4 cannot
	// take (KAFKA-17011: older Java clients throw on a minimum of 0): below v4 they are left
	// out of the supported features, as Kafka leaves them out (KAFKA-17492).
	supported := resp.Version >= 4
	for _, f := range fixedFeatures {
		if supported {
			resp.SupportedFeatures = append(resp.SupportedFeatures, kmsg.ApiVersionsResponseSupportedFeature{Name: f.name, MinVersion: 0, MaxVersion: f.max})
		}
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, kmsg.ApiVersionsResponseFinalizedFeature{Name: f.name, MinVersionLevel: f.max, MaxVersionLevel: f.max})
	}
	if supported {
		resp.SupportedFeatures = append(resp.SupportedFeatures, kmsg.ApiVersionsResponseSupportedFeature{Name: controller.LevelFeature, MinVersion: 0, MaxVersion: controller.Level})
	}
	if level > 0 { // as Kafka, a feature at level 0 is not finalized
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, kmsg.ApiVersionsResponseFinalizedFeature{Name: controller.LevelFeature, MinVersionLevel: level, MaxVersionLevel: level})
	}
	resp.FinalizedFeaturesEpoch = 1 + int64(level) // changes only when a finalized level does
}

// handleUpdateFeatures is what kafka-features upgrade sends (KIP-584, KIP-778), on any node (as a
// Kafka broker forwards it to the active controller). runnel.command.level is raised as an
// operator asks (with runnel.command.level.auto=false the cluster waits for that); a level is
// never lowered, whatever the downgrade type (the log may hold commands of it), and a downgrade
// type to a higher level is refused, as Kafka refuses it. The fixed features take only their
// level. As in Kafka the request is all or nothing: every update is checked first, and on a
// refusal nothing is applied and every feature is answered with the first refusal
// (INVALID_UPDATE_VERSION with the reason; v2 top-level only). ALTER on CLUSTER.
// docs/cluster.md §3.2.
func handleUpdateFeatures(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	b := r.conn.b
	cctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	var fail *adminError
	raise := -1
	seen := map[string]bool{}
	for _, u := range req.FeatureUpdates {
		lvl, err := b.checkFeature(req.Version, u, seen)
		if err != nil {
			fail = &adminError{err.code, u.Feature + ": " + err.msg}
			break
		}
		if lvl >= 0 {
			raise = lvl
		}
	}
	// The level is the one update the active controller checks: asked last, once every other
	// update is known good (they change nothing), it applies or refuses for the whole request.
	if fail == nil && raise >= 0 {
		if err := b.raiseLevel(cctx, raise, req.ValidateOnly); err != nil {
			fail = &adminError{err.code, controller.LevelFeature + ": " + err.msg}
		}
	}
	for _, u := range req.FeatureUpdates {
		res := kmsg.NewUpdateFeaturesResponseResult()
		res.Feature = u.Feature
		if fail != nil {
			res.ErrorCode, res.ErrorMessage = fail.code.Code, strp(fail.msg)
		}
		resp.Results = append(resp.Results, res)
	}
	if fail != nil {
		resp.ErrorCode, resp.ErrorMessage = fail.code.Code, strp(fail.msg)
	}
	return reply{resp: resp}
}

// checkFeature checks one update as far as this node can (the active controller checks a level
// when it is raised), and returns the command level to raise to (-1: none).
func (b *Broker) checkFeature(version int16, u kmsg.UpdateFeaturesRequestFeatureUpdate, seen map[string]bool) (int, *adminError) {
	if seen[u.Feature] {
		return -1, adminErr(kerr.InvalidRequest, "the feature is named more than once")
	}
	seen[u.Feature] = true
	downgrade := u.UpgradeType > 1 // v1+: 1 upgrade, 2 safe downgrade, 3 unsafe downgrade
	if version == 0 {
		downgrade = u.AllowDowngrade
	}
	for _, f := range fixedFeatures {
		if u.Feature == f.name {
			if u.MaxVersionLevel != f.max {
				return -1, adminErr(kerr.InvalidUpdateVersion, "Runnel keeps %s at level %d", f.name, f.max)
			}
			return -1, nil
		}
	}
	if u.Feature != controller.LevelFeature {
		return -1, adminErr(kerr.InvalidUpdateVersion, "Runnel has no feature %q (its features: transaction.version, group.version, share.version, streams.version, %s)", u.Feature, controller.LevelFeature)
	}
	lvl := int(u.MaxVersionLevel)
	if downgrade && lvl > b.cl.Image().Level {
		return -1, adminErr(kerr.InvalidUpdateVersion, "Can't downgrade to a newer version.")
	}
	return lvl, nil
}

// raiseLevel raises the command level to lvl through the active controller, or only checks
// that it could (validateOnly).
func (b *Broker) raiseLevel(ctx context.Context, lvl int, validateOnly bool) *adminError {
	err := b.cl.FinalizeLevel(ctx, lvl, validateOnly)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, controller.ErrLevelChange):
		return adminErr(kerr.InvalidUpdateVersion, "%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return adminErr(kerr.RequestTimedOut, "%v", err)
	}
	return adminErr(kerr.FeatureUpdateFailed, "%v", fmt.Errorf("raising %s to %d: %w", controller.LevelFeature, lvl, err))
}
