// Package natsbus carries Salt events over NATS: the connection and its
// authentication, the reversible mapping between Salt tags and NATS
// subjects, the message envelope and its headers, publishing (core,
// JetStream, acknowledged) and core subscriptions. Built on it:
// natsbus/consume (the JetStream consumers), natsbus/kv (the replicas'
// shared state), natsbus/embedded (the embedded server) and
// actions/natsdriver (the nats driver).
package natsbus

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultPrefix is the subject prefix of Salt events.
const DefaultPrefix = "salt.evt."

// MaxSubject bounds the length of an event subject. A NATS server closes
// a connection whose protocol line (PUB or HPUB with subject, reply and
// sizes) exceeds its max_control_line, 4 KiB by default; a tag of dots
// triples in length once escaped. Subjects that would be longer keep their
// leading tokens (so a filter on those still selects them) and end in a
// token holding a hash of the whole tag; the tag itself travels in the body,
// which rules match anyway.
const MaxSubject = 1024

// cutMark starts the last token of a cut subject. Subject never writes it
// otherwise: it writes '%' alone or followed by two hex digits.
const cutMark = "%~"

// ErrCutSubject reports a subject Subject cut because the tag was too long:
// the tag is only in the message body.
var ErrCutSubject = errors.New("subject of an over-long tag: the tag is in the message body")

// Subject maps a Salt tag to a NATS subject under prefix: one token per
// `/`-separated part of the tag, so `salt.evt.salt.job.>` selects job events.
// A token keeps ASCII letters, digits and `-_:@+=,~`; every other byte is
// written %XX (including `.`, spaces, `*`, `>` and `%`), and an empty part
// (the `//` of beacon tags) is the token `%`. Tag(prefix, Subject(prefix, t))
// returns t for every tag whose subject fits MaxSubject; a longer one is cut
// (see MaxSubject) and Tag reports ErrCutSubject for it.
func Subject(prefix, tag string) string {
	s := subject(prefix, tag)
	if len(s) <= MaxSubject {
		return s
	}
	sum := sha256.Sum256([]byte(tag))
	mark := "." + cutMark + hex.EncodeToString(sum[:12])
	keep := s[:MaxSubject-len(mark)]
	if i := strings.LastIndexByte(keep, '.'); i >= len(prefix) {
		keep = keep[:i] // whole tokens only
	} else {
		keep = strings.TrimSuffix(prefix, ".")
	}
	return keep + mark
}

func subject(prefix, tag string) string {
	var b strings.Builder
	b.Grow(len(prefix) + len(tag) + 8)
	b.WriteString(prefix)
	start := true
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if c == '/' {
			if start {
				b.WriteByte('%')
			}
			b.WriteByte('.')
			start = true
			continue
		}
		start = false
		if plainByte(c) {
			b.WriteByte(c)
			continue
		}
		const hex = "0123456789ABCDEF"
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	if start {
		b.WriteByte('%')
	}
	return b.String()
}

func plainByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '_', ':', '@', '+', '=', ',', '~':
		return true
	}
	return false
}

// ErrNotEventSubject reports a subject outside the event prefix.
var ErrNotEventSubject = errors.New("subject is not an event subject")

// Tag maps a subject made by Subject or KeyedSubject back to the tag.
func Tag(prefix, subject string) (string, error) {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok || rest == "" {
		return "", fmt.Errorf("%q: %w", subject, ErrNotEventSubject)
	}
	if k, ok := strings.CutPrefix(rest, keyMark+"."); ok {
		// A keyed subject: the key's hash token, then the tag's.
		_, rest, ok = strings.Cut(k, ".")
		if !ok || rest == "" {
			return "", fmt.Errorf("%q: %w", subject, ErrNotEventSubject)
		}
	}
	if i := strings.LastIndexByte(rest, '.'); strings.HasPrefix(rest[i+1:], cutMark) {
		return "", fmt.Errorf("%q: %w", subject, ErrCutSubject)
	}
	var b strings.Builder
	for i, tok := range strings.Split(rest, ".") {
		if i > 0 {
			b.WriteByte('/')
		}
		if tok == "%" {
			continue
		}
		for j := 0; j < len(tok); j++ {
			c := tok[j]
			if c != '%' {
				if !plainByte(c) {
					return "", fmt.Errorf("subject %q: byte %q must be escaped", subject, c)
				}
				b.WriteByte(c)
				continue
			}
			if j+2 >= len(tok) {
				return "", fmt.Errorf("subject %q: truncated escape", subject)
			}
			hi, ok1 := unhex(tok[j+1])
			lo, ok2 := unhex(tok[j+2])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("subject %q: bad escape", subject)
			}
			b.WriteByte(hi<<4 | lo)
			j += 2
		}
	}
	return b.String(), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Partition keys in subjects.
//
// An event published to JetStream carries a hash of its ordering key (its
// minion, else its tag: event.OrderKey) in its subject, right after the
// prefix: `salt.evt.%K.<8 hex digits>.<tag tokens>`. `%K` is a token
// Subject never writes, so the two forms cannot be confused, and
// `salt.evt.>` still selects every event. With --partitions the stream
// maps these subjects, as it stores them, to partition subjects outside
// the event prefix — `salt.evt-part.<N>.<partition>.<hash>.<tag tokens>`,
// the partition chosen by the server's own deterministic partition()
// mapping of the hash — so that each partition's consumer filters to its
// own subject and receives only its events. Events published without the
// key (core NATS, older bridges, other tools) keep their subject and are
// read through a lane of their own.

// keyMark is the token that announces a key hash in an event subject.
const keyMark = "%K"

// KeyToken is the subject token of an ordering key: FNV-1a (32 bits) of
// the key in 8 lower-case hex digits, fixed-width whatever the key holds
// (minion ids hold dots).
func KeyToken(key string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], h.Sum32())
	return hex.EncodeToString(b[:])
}

// KeyedSubject maps a Salt tag to its subject under prefix with the hash
// of key (see KeyToken) before the tag's tokens.
func KeyedSubject(prefix, tag, key string) string {
	return Subject(prefix+keyMark+"."+KeyToken(key)+".", tag)
}

// PartitionPrefix is where a stream with partitions stores keyed events:
// the event prefix's last token with "-part" added (`salt.evt-part.`),
// outside the event prefix, so that the subjects left under it are those
// of events published without a key.
func PartitionPrefix(prefix string) string {
	return strings.TrimSuffix(prefix, ".") + "-part."
}

// PartitionTransform is the stream's subject transform for n partitions:
// keyed subjects are stored as PartitionPrefix.<n>.<partition>.<hash>.<tag>.
func PartitionTransform(prefix string, n int) jetstream.SubjectTransformConfig {
	ns := strconv.Itoa(n)
	return jetstream.SubjectTransformConfig{
		Source:      prefix + keyMark + ".*.>",
		Destination: PartitionPrefix(prefix) + ns + ".{{partition(" + ns + ",1)}}.{{wildcard(1)}}.>",
	}
}

// PartitionFilter is the subject filter of partition i of n (see
// PartitionTransform).
func PartitionFilter(prefix string, n, i int) string {
	return PartitionPrefix(prefix) + strconv.Itoa(n) + "." + strconv.Itoa(i) + ".>"
}

// PartitionOf returns the partition among n of events with ordering key
// key: the partition the stream's transform stores them under (the
// server's partition() is FNV-1a of the hash token, modulo n). Every
// replica, version and the server agree on it.
func PartitionOf(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(KeyToken(key)))
	return int(h.Sum32() % uint32(n))
}
