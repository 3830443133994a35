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
// clients' transactions (KIP-890), share groups (KIP-932) and streams groups (KIP-1071).
var fixedFeatures = []struct {
	name string
	max  int16
}{{"transaction.version", 2}, {"share.version", 1}, {"streams.version", 1}}

// features fills ApiVersions v3+'s features: the fixed ones, and the command level
// (controller.LevelFeature: supported up to this version's level, finalized at the cluster's).
func (b *Broker) features(resp *kmsg.ApiVersionsResponse) {
	level := int16(b.cl.Image().Level)
	resp.SupportedFeatures = resp.SupportedFeatures[:0]
	resp.FinalizedFeatures = resp.FinalizedFeatures[:0]
	for _, f := range fixedFeatures {
		resp.SupportedFeatures = append(resp.SupportedFeatures, kmsg.ApiVersionsResponseSupportedFeature{Name: f.name, MinVersion: 0, MaxVersion: f.max})
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, kmsg.ApiVersionsResponseFinalizedFeature{Name: f.name, MinVersionLevel: f.max, MaxVersionLevel: f.max})
	}
	resp.SupportedFeatures = append(resp.SupportedFeatures, kmsg.ApiVersionsResponseSupportedFeature{Name: controller.LevelFeature, MinVersion: 0, MaxVersion: controller.Level})
	if level > 0 { // as Kafka, a feature at level 0 is not finalized
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, kmsg.ApiVersionsResponseFinalizedFeature{Name: controller.LevelFeature, MinVersionLevel: level, MaxVersionLevel: level})
	}
	resp.FinalizedFeaturesEpoch = 1 + int64(level) // changes only when a finalized level does
}

// handleUpdateFeatures is what kafka-features upgrade sends (KIP-584, KIP-778), on any node (as a
// Kafka broker forwards it to the active controller). runnel.command.level is raised as an
// operator asks (with runnel.command.level.auto=false the cluster waits for that); a level is
// never lowered, whatever the downgrade type (the log may hold commands of it). The fixed
// features take only their level. Anything else: INVALID_UPDATE_VERSION with the reason
// (v2 answers the first failure as the top-level error, as Kafka does). ALTER on CLUSTER.
// docs/cluster.md §3.2.
func handleUpdateFeatures(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	b := r.conn.b
	seen := map[string]bool{}
	for _, u := range req.FeatureUpdates {
		res := kmsg.NewUpdateFeaturesResponseResult()
		res.Feature = u.Feature
		err := b.updateFeature(ctx, u, req.ValidateOnly, seen)
		if err != nil {
			res.ErrorCode, res.ErrorMessage = err.code.Code, strp(err.msg)
			if req.Version >= 2 && resp.ErrorCode == 0 {
				resp.ErrorCode, resp.ErrorMessage = err.code.Code, strp(u.Feature+": "+err.msg)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return reply{resp: resp}
}

func (b *Broker) updateFeature(ctx context.Context, u kmsg.UpdateFeaturesRequestFeatureUpdate, validateOnly bool, seen map[string]bool) *adminError {
	if seen[u.Feature] {
		return adminErr(kerr.InvalidRequest, "the feature is named more than once")
	}
	seen[u.Feature] = true
	for _, f := range fixedFeatures {
		if u.Feature == f.name {
			if u.MaxVersionLevel != f.max {
				return adminErr(kerr.InvalidUpdateVersion, "Runnel keeps %s at level %d", f.name, f.max)
			}
			return nil
		}
	}
	if u.Feature != controller.LevelFeature {
		return adminErr(kerr.InvalidUpdateVersion, "Runnel has no feature %q (its features: transaction.version, share.version, streams.version, %s)", u.Feature, controller.LevelFeature)
	}
	cctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	err := b.cl.FinalizeLevel(cctx, int(u.MaxVersionLevel), validateOnly)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, controller.ErrLevelChange):
		return adminErr(kerr.InvalidUpdateVersion, "%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return adminErr(kerr.RequestTimedOut, "%v", err)
	}
	return adminErr(kerr.FeatureUpdateFailed, "%v", fmt.Errorf("raising %s to %d: %w", controller.LevelFeature, u.MaxVersionLevel, err))
}
