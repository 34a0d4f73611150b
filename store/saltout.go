package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteJobs writes jobs as salt-run jobs.list_jobs prints them: each jid
// and its Listing's fields, one a line; with asJSON, one object {jid:
// listing}, in the jobs' order, indented as Salt's json outputter does.
func WriteJobs(w io.Writer, jobs []Job, asJSON bool) error {
	if asJSON {
		obj := make([]member, len(jobs))
		for i, j := range jobs {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(j.Listing()); err != nil {
				return fmt.Errorf("job %s: %w", j.JID, err)
			}
			obj[i] = member{j.JID, bytes.TrimSpace(b.Bytes())}
		}
		return writeObject(w, obj)
	}
	var b bytes.Buffer
	for _, j := range jobs {
		l := j.Listing()
		fmt.Fprintf(&b, "%s:\n    Function: %s\n    Arguments: %s\n    Target: %s\n    Target-type: %s\n    User: %s\n",
			j.JID, plain(l.Function), plainList(l.Arguments), plain(l.Target), plain(l.TargetType), plain(l.User))
		if l.Metadata != nil {
			fmt.Fprintf(&b, "    Metadata: %s\n", plain(l.Metadata))
		}
		fmt.Fprintf(&b, "    StartTime: %s\n", l.StartTime)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteReturns writes a job's returns as salt-run jobs.lookup_jid prints
// them: each minion and its return, indented; with asJSON, one object
// {minion id: return}, in the returns' order.
func WriteReturns(w io.Writer, rets []Return, asJSON bool) error {
	if asJSON {
		obj := make([]member, len(rets))
		for i, r := range rets {
			obj[i] = member{r.MinionID, r.Return}
		}
		return writeObject(w, obj)
	}
	var out bytes.Buffer
	for _, r := range rets {
		var b bytes.Buffer
		if err := json.Indent(&b, orNull(r.Return), "    ", "    "); err != nil {
			b.Reset()
			b.Write(r.Return)
		}
		fmt.Fprintf(&out, "%s:\n    %s\n", r.MinionID, b.Bytes())
	}
	_, err := w.Write(out.Bytes())
	return err
}

// WriteTrace writes ledger entries one a line: the time, the stage, the
// fields that are set (event, tag, rule, file, reaction, jid, minion) and
// the detail.
func WriteTrace(w io.Writer, entries []LedgerEntry) error {
	var b bytes.Buffer
	for _, e := range entries {
		var parts []string
		add := func(k, v string) {
			if v != "" {
				parts = append(parts, k+"="+v)
			}
		}
		add("event", e.EventID)
		add("tag", e.Tag)
		add("rule", e.Rule)
		add("file", e.File)
		add("reaction", e.ReactionID)
		add("jid", e.JID)
		add("minion", e.Minion)
		fmt.Fprintf(&b, "%s %-10s %s  %s\n", e.Time.UTC().Format(time.RFC3339Nano), e.Stage, strings.Join(parts, " "), e.Detail)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// member is one member of a JSON object written in order.
type member struct {
	key   string
	value json.RawMessage
}

// writeObject writes members as one JSON object, in their order, indented
// by four spaces as Salt's json outputter does.
func writeObject(w io.Writer, members []member) error {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(orNull(m.value))
	}
	b.WriteByte('}')
	var ind bytes.Buffer
	if err := json.Indent(&ind, b.Bytes(), "", "    "); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	ind.WriteByte('\n')
	_, err := w.Write(ind.Bytes())
	return err
}

// orNull is raw, or null when raw is empty.
func orNull(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// plain shows a JSON value on one line: a string as its text, anything
// else as compact JSON.
func plain(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, orNull(raw)) != nil {
		return string(raw)
	}
	return b.String()
}

// plainList shows JSON values as a compact JSON array.
func plainList(vals []json.RawMessage) string {
	b, err := json.Marshal(vals)
	if err != nil {
		return fmt.Sprint(vals)
	}
	return string(b)
}
