package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/runnel-dev/runnel/internal/adminops"
)

// GroupRow is one line of the groups page.
type GroupRow struct {
	Group, State, Protocol string
	Members                int
	Lag                    int64
	Err                    string
}

func (c *Console) groups(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	var rows []GroupRow
	cl, adm, err := c.client(r)
	if err == nil {
		var listed kadm.ListedGroups
		if listed, err = adm.ListGroups(ctx); err == nil {
			// Consumer groups of the KIP-848 protocol are described by ConsumerGroupDescribe
			// (DescribeGroups, which kadm.Lag asks, knows only classic groups, as Kafka's).
			consumerType := map[string]bool{}
			if typed, terr := adm.ListGroupsByType(ctx, []string{"consumer"}); terr == nil {
				for name := range typed {
					consumerType[name] = true
				}
			}
			own := func(g kadm.ListedGroup) bool {
				return g.ProtocolType == "share" || g.ProtocolType == "streams" || consumerType[g.Group]
			}
			var names []string // of the groups kadm.Lag describes: classic groups
			for _, g := range listed.Sorted() {
				if !own(g) {
					names = append(names, g.Group)
				}
			}
			var lags kadm.DescribedGroupLags
			var lerr error
			if len(names) > 0 { // none would describe every group
				lags, lerr = adm.Lag(ctx, names...)
			}
			for _, g := range listed.Sorted() {
				row := GroupRow{Group: g.Group, State: g.State, Protocol: g.ProtocolType}
				if own(g) { // a share group by its share-partitions, a consumer group by its members
					if d, derr := adminops.DescribeGroup(ctx, cl, g.Group); derr != nil {
						row.Err = derr.Error()
					} else {
						row.Members, row.Lag = len(d.Members), d.TotalLag()
					}
				} else if l, ok := lags[g.Group]; ok && l.Error() == nil {
					row.Members, row.Lag = len(l.Members), l.Lag.Total()
				} else if ok {
					row.Err = l.Error().Error()
				}
				rows = append(rows, row)
			}
			err = lerr
		}
	}
	c.render(w, r, "groups", page{Title: "Consumer groups", Nav: "groups", Data: rows, Error: errText(err)})
}

// GroupPage is the group page's data.
type GroupPage struct {
	adminops.Group
	Topics []string // the topics it has offsets for
}

func (c *Console) group(w http.ResponseWriter, r *http.Request) {
	c.renderGroup(w, r, "", nil, 0)
}

func (c *Console) renderGroup(w http.ResponseWriter, r *http.Request, errMsg string, form map[string][]string, status int) {
	name := r.PathValue("group")
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	gp := GroupPage{Group: adminops.Group{Group: name}}
	cl, _, err := c.client(r)
	if err == nil {
		gp.Group, err = adminops.DescribeGroup(ctx, cl, name)
	}
	seen := map[string]bool{}
	for _, p := range gp.Partitions {
		if !seen[p.Topic] {
			seen[p.Topic] = true
			gp.Topics = append(gp.Topics, p.Topic)
		}
	}
	if err != nil {
		errMsg = strings.TrimSpace(errMsg + " " + err.Error())
		if status == 0 {
			status = http.StatusBadGateway
		}
	}
	c.render(w, r, "group", page{Title: "Group " + name, Nav: "groups", Data: gp, Error: errMsg, Form: form, Status: status})
}

func (c *Console) resetGroup(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	name := r.PathValue("group")
	fail := func(msg string) { c.renderGroup(w, r, msg, r.PostForm, http.StatusUnprocessableEntity) }
	topic := strings.TrimSpace(r.PostForm.Get("topic"))
	var to adminops.ResetTarget
	switch r.PostForm.Get("to") {
	case "earliest":
		to.Earliest = true
	case "latest":
		to.Latest = true
	case "offset":
		n, err := strconv.ParseInt(strings.TrimSpace(r.PostForm.Get("offset")), 10, 64)
		if err != nil || n < 0 {
			fail("The offset must be a whole number, 0 or more: nothing was changed.")
			return
		}
		to.Offset = &n
	case "timestamp":
		ms, err := parseTime(strings.TrimSpace(r.PostForm.Get("timestamp")))
		if err != nil {
			fail(err.Error() + ": nothing was changed.")
			return
		}
		to.TimestampMs = &ms
	default:
		fail("Choose where to reset to: earliest, latest, an offset or a timestamp.")
		return
	}
	if r.PostForm.Get("confirm") != "yes" {
		fail("Tick the confirmation to reset the offsets: nothing was changed.")
		return
	}
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	_, adm, err := c.client(r)
	var rows []adminops.GroupPartition
	if err == nil {
		rows, err = adminops.ResetOffsets(ctx, adm, name, topic, nil, to)
	}
	if err != nil {
		fail("Resetting: " + err.Error())
		return
	}
	redirect(w, r, "/groups/"+url.PathEscape(name), fmt.Sprintf("Reset %d partition(s) of %s.", len(rows), topic))
}

func (c *Console) deleteGroup(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	name := r.PathValue("group")
	if r.PostForm.Get("confirm") != name {
		c.renderGroup(w, r, "To delete the group, type its name exactly: nothing was deleted.", r.PostForm, http.StatusUnprocessableEntity)
		return
	}
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	_, adm, err := c.client(r)
	if err == nil {
		var res kadm.DeleteGroupResponses
		if res, err = adm.DeleteGroups(ctx, name); err == nil {
			if x, ok := res[name]; ok && x.Err != nil {
				err = x.Err
			}
		}
	}
	if err != nil {
		c.renderGroup(w, r, "Deleting: "+err.Error(), r.PostForm, http.StatusUnprocessableEntity)
		return
	}
	redirect(w, r, "/groups", "Deleted group "+name+".")
}
