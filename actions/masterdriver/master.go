// Package masterdriver is the action driver that publishes jobs the way
// Salt's own `salt` command and reactor do: in-process, over the master's
// request channel (ZeroMQ, ret_port 4506), with a clear-text request
// authenticated by the key file the master writes for its local users
// (cachedir/.root_key). It publishes local jobs (LocalClient.pub's
// payload, as _prep_pub builds it). Runner and wheel reactions and
// render-time Salt calls go to reactord's Salt engine in the master
// (Engine) when it answers, as Salt's reactor runs them in its own
// process; otherwise runners start through the master's runner clear
// function, which runs each in a process of its own, and wheel reactions
// and calls go to Config.Fallback (the exec driver's salt-run). caller
// reactions are not its: the daemon routes them to the exec driver.
//
// Requests go through a bounded pool of REQ sockets, one request in
// flight each; a socket whose reply does not come in time is closed and
// replaced, as Salt's client does.
package masterdriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/reactord/reactord/actions"
	"github.com/reactord/reactord/event"
)

// Config configures a Driver.
type Config struct {
	// Master is the master's configuration (ReadMasterConfig).
	Master MasterConfig
	// User is the local user the jobs are published as (the salt
	// command's get_specific_user): "root" by default. Its key file
	// (MasterConfig.KeyFile) must be readable.
	User string
	// KeyFile overrides the key file.
	KeyFile string
	// URI overrides the master's request server (tcp://HOST:PORT).
	URI string
	// Sockets bounds the requests in flight (zero: DefaultSockets).
	Sockets int
	// Timeout bounds one request (default 15s; the salt command's is 5s,
	// a busy master answers later).
	Timeout time.Duration
	// Engine is the socket of reactord's Salt engine: "" for the master's
	// sock_dir/reactord.ipc (MasterConfig.EngineSocket), "off" for none.
	Engine string
	// Fallback runs wheel reactions and render-time Salt calls when the
	// engine does not answer (the exec driver); nil refuses them then.
	Fallback actions.Driver
	// Log receives the engine's changes (answers, does not); nil means
	// slog.Default().
	Log *slog.Logger
}

// DefaultSockets bounds the requests in flight when Config.Sockets is
// zero.
const DefaultSockets = 8

// Driver publishes jobs over the master's request channel.
type Driver struct {
	cfg    Config
	uri    string
	pool   chan *reqSocket
	engine *Engine // nil: none

	mu     sync.Mutex
	key    string
	closed bool
}

// reqSocket is one REQ socket; nil sock means not connected yet.
type reqSocket struct {
	sock zmq4.Socket
	ctx  context.Context
	stop context.CancelFunc
}

// New returns a driver; it reads the key file at once, so that a user who
// cannot read it learns it at start.
func New(cfg Config) (*Driver, error) {
	if cfg.User == "" {
		cfg.User = "root"
	}
	if cfg.Sockets <= 0 {
		cfg.Sockets = DefaultSockets
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Second
	}
	if cfg.KeyFile == "" {
		cfg.KeyFile = cfg.Master.KeyFile(cfg.User)
	}
	d := &Driver{cfg: cfg, uri: cfg.URI, pool: make(chan *reqSocket, cfg.Sockets)}
	if d.uri == "" {
		d.uri = cfg.Master.URI()
	}
	key, err := d.readKey()
	if err != nil {
		return nil, err
	}
	d.key = key
	switch cfg.Engine {
	case "off":
	case "":
		d.engine = NewEngine(cfg.Master.EngineSocket(), cfg.Log)
	default:
		d.engine = NewEngine(cfg.Engine, cfg.Log)
	}
	for range cfg.Sockets {
		d.pool <- &reqSocket{}
	}
	return d, nil
}

// readKey reads the key file the salt command reads.
func (d *Driver) readKey() (string, error) {
	b, err := os.ReadFile(d.cfg.KeyFile)
	if err != nil {
		return "", fmt.Errorf("reading the master's key for user %s: %w (run reactord as root or the master's user, or list its user in the master's publisher_acl)", d.cfg.User, err)
	}
	return string(b), nil
}

// Name implements actions.Driver.
func (d *Driver) Name() string { return "master" }

// Supports implements actions.Driver: local and runner reactions, and
// wheel ones with the engine or a fallback that runs them.
func (d *Driver) Supports(state string) bool {
	switch state {
	case "local", "runner":
		return true
	case "wheel":
		return d.engine != nil || d.cfg.Fallback != nil && d.cfg.Fallback.Supports(state)
	}
	return false
}

// SaysSent reports whether the driver calls actions.Sent for state's
// reactions: local and runner ones go to the master's request port or to
// the engine, which say once the request is written; a wheel reaction
// does with the engine (the fallback, a program run, says at once).
func (d *Driver) SaysSent(state string) bool {
	switch state {
	case "local", "runner":
		return true
	case "wheel":
		return d.engine != nil
	}
	return false
}

// Engine is the client of reactord's Salt engine (nil with Engine "off").
func (d *Driver) Engine() *Engine { return d.engine }

// Do implements actions.Driver.
func (d *Driver) Do(ctx context.Context, a actions.Action) (actions.Result, error) {
	call, err := actions.CallFor(a.Chunk)
	if err != nil {
		return actions.Result{}, err
	}
	switch call.Client {
	case "local":
		return d.publish(ctx, call)
	case "runner", "wheel":
		if d.engine != nil {
			jid, err := d.engine.Run(ctx, call.Client, plain(a.Chunk).(map[string]any))
			if err == nil {
				return actions.Result{JID: jid}, nil
			}
			if !errors.Is(err, errEngineDown) {
				return actions.Result{}, err
			}
		}
		if call.Client == "runner" {
			return d.runner(ctx, call)
		}
		if d.cfg.Fallback != nil && d.cfg.Fallback.Supports("wheel") {
			// The fallback runs a program and cannot say when its request
			// left: the lane goes on now, as for a driver that does not
			// say (SaysSent told it to wait for this one).
			actions.Sent(ctx)
			return d.cfg.Fallback.Do(ctx, a)
		}
		return actions.Result{}, actions.Retryable(fmt.Errorf("wheel reactions run through reactord's Salt engine, which does not answer at %s", d.engine.Path()))
	}
	return actions.Result{}, fmt.Errorf("%s reactions run through the exec or saltapi driver", call.Client)
}

// SaltCall implements reactions.SaltCaller: an execution function run by
// the master's loader in reactord's Salt engine, as Salt's reactor runs a
// reaction file's salt['mod.fun'](...) calls, or by the fallback (salt-run
// salt.cmd) when the engine does not answer.
func (d *Driver) SaltCall(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error) {
	if d.engine != nil {
		v, err := d.engine.Call(ctx, fun, args, kwargs)
		if err == nil || !errors.Is(err, errEngineDown) {
			return v, err
		}
	}
	type saltCaller interface {
		SaltCall(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error)
	}
	if c, ok := d.cfg.Fallback.(saltCaller); ok {
		return c.SaltCall(ctx, fun, args, kwargs)
	}
	return nil, errors.New("the reactord Salt engine does not answer and no fallback runs Salt functions (the exec driver does)")
}

// Status says how runner and wheel reactions and render-time calls run
// (the engine's Status), for /healthz and check; "" without an engine or
// before it was asked.
func (d *Driver) Status() string {
	if d.engine == nil {
		return ""
	}
	return d.engine.Status()
}

// PublishLoad is the load LocalClient._prep_pub builds for a call, with
// key the master's key for the user.
func (d *Driver) PublishLoad(call actions.Call, key string) (map[string]any, error) {
	tgt, tgtType := call.Tgt, call.TgtType
	if tgtType == "nodegroup" {
		s, ok := tgt.(string)
		if !ok {
			return nil, fmt.Errorf("a nodegroup target must be a name, not %T", tgt)
		}
		expr, ok := d.nodegroup(s, map[string]bool{})
		if !ok {
			return nil, fmt.Errorf("node group %s unavailable in the master's configuration", s)
		}
		tgt, tgtType = expr, "compound"
	} else if tgtType == "compound" {
		if s, ok := tgt.(string); ok {
			words := strings.Fields(s)
			for i, w := range words {
				if strings.HasPrefix(w, "N@") && len(w) > 2 {
					if expr, ok := d.nodegroup(w[2:], map[string]bool{}); ok {
						words[i] = "( " + expr + " )"
					}
				}
			}
			tgt = strings.Join(words, " ")
		}
	}
	ret := ""
	switch r := call.Ret.(type) {
	case string:
		ret = r
	case []any:
		parts := make([]string, len(r))
		for i, p := range r {
			parts[i] = fmt.Sprint(p)
		}
		ret = strings.Join(parts, ",")
	}
	if ext := d.cfg.Master.ExtJobCache; ext != "" {
		if ret != "" {
			ret += "," + ext
		} else {
			ret = ext
		}
	}
	arg := append([]any{}, call.Arg...)
	if call.Kwarg != nil && call.Kwarg.Len() > 0 {
		// salt.utils.args.condition_input: keyword arguments travel as a
		// last positional dict marked __kwarg__.
		kw := map[string]any{"__kwarg__": true}
		for i := 0; i < call.Kwarg.Len(); i++ {
			k, v := call.Kwarg.At(i)
			kw[k] = plain(v)
		}
		arg = append(arg, kw)
	}
	load := map[string]any{
		"cmd": "publish", "tgt": plain(tgt), "fun": call.Fun, "arg": plain(arg), "key": key,
		"tgt_type": tgtType, "ret": ret, "jid": "", "user": d.cfg.User,
	}
	kwargs := map[string]any{}
	timeout := 0
	for i := 0; i < call.Extra.Len(); i++ {
		k, v := call.Extra.At(i)
		switch {
		case k == "timeout":
			if n, ok := toInt(v); ok {
				timeout = n
			}
		case k == "jid" || strings.HasPrefix(k, "__") || k == "name" || k == "order":
			// the compiler's bookkeeping, not the client's
		default:
			kwargs[k] = plain(v)
		}
	}
	if len(kwargs) > 0 {
		load["kwargs"] = kwargs
	}
	if d.cfg.Master.OrderMasters {
		if timeout == 0 {
			timeout = 5
		}
		load["to"] = timeout
	}
	return load, nil
}

// nodegroup expands a nodegroup as salt.utils.minions.nodegroup_comp
// does: nested N@ groups in parentheses, a group naming itself refused.
func (d *Driver) nodegroup(name string, seen map[string]bool) (string, bool) {
	def, ok := d.cfg.Master.Nodegroups[name]
	if !ok || seen[name] {
		return "", false
	}
	seen[name] = true
	defer delete(seen, name)
	words := strings.Fields(def)
	nested := false
	for i, w := range words {
		if strings.HasPrefix(w, "N@") && len(w) > 2 {
			inner, ok := d.nodegroup(w[2:], seen)
			if !ok {
				return "", false
			}
			words[i], nested = "( "+inner+" )", true
		}
	}
	if !nested {
		if joined, ok := nodegroupList(words); ok {
			return joined, true
		}
	}
	return strings.Join(words, " "), true
}

// nodegroupList is salt.utils.minions._nodegroup_regex: a nodegroup of
// plain words (no operator, no X@ matcher, no wildcard) is a list of
// minions (L@a,b), or an expression (E@...) when a word holds a regular
// expression's bracket or escape.
func nodegroupList(words []string) (string, bool) {
	for _, w := range words {
		switch {
		case w == "and" || w == "or" || w == "not" || w == "(" || w == ")":
			return "", false
		case strings.Contains(w, "*"), len(w) > 1 && w[1] == '@' && w[0] >= 'A' && w[0] <= 'Z':
			return "", false
		}
	}
	for _, w := range words {
		if strings.ContainsAny(w, "([{\\?}])") {
			return "E@" + strings.Join(words, ","), true
		}
	}
	return "L@" + strings.Join(words, ","), true
}

// publish publishes a local job and returns its jid and the minions the
// master targeted.
func (d *Driver) publish(ctx context.Context, call actions.Call) (actions.Result, error) {
	key := d.currentKey()
	load, err := d.PublishLoad(call, key)
	if err != nil {
		return actions.Result{}, err
	}
	reply, err := d.requestKeyed(ctx, load, key)
	if err != nil {
		return actions.Result{}, err
	}
	if err := replyError(reply); err != nil {
		return actions.Result{}, err
	}
	body, _ := reply["load"].(map[string]any)
	jid, _ := body["jid"].(string)
	if jid == "" {
		return actions.Result{}, fmt.Errorf("the master's answer holds no jid: %v", reply)
	}
	res := actions.Result{JID: jid}
	if ms, ok := body["minions"].([]any); ok {
		for _, m := range ms {
			res.Minions = append(res.Minions, fmt.Sprint(m))
		}
	}
	return res, nil
}

// runner starts a runner function through the master's runner clear
// function, which runs it asynchronously and answers with its jid.
func (d *Driver) runner(ctx context.Context, call actions.Call) (actions.Result, error) {
	low := map[string]any{}
	if len(call.Arg) > 0 {
		low["arg"] = plain(call.Arg)
		low["kwarg"] = plain(call.Kwarg)
	} else {
		for i := 0; i < call.Kwarg.Len(); i++ {
			k, v := call.Kwarg.At(i)
			low[k] = plain(v)
		}
	}
	key := d.currentKey()
	load := map[string]any{"cmd": "runner", "fun": call.Fun, "kwarg": low, "key": key, "user": d.cfg.User}
	reply, err := d.requestKeyed(ctx, load, key)
	if err != nil {
		return actions.Result{}, err
	}
	if err := replyError(reply); err != nil {
		return actions.Result{}, err
	}
	jid, _ := reply["jid"].(string)
	if jid == "" {
		return actions.Result{}, fmt.Errorf("the master's answer to runner %s holds no jid: %v", call.Fun, reply)
	}
	return actions.Result{JID: jid}, nil
}

func (d *Driver) currentKey() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.key
}

func (d *Driver) setKey(k string) {
	d.mu.Lock()
	d.key = k
	d.mu.Unlock()
}

// requestKeyed sends a load authenticated by key; when the master does not
// take the key (it writes a new one each time it starts), it reads the key
// file again and, if the key changed, sends the load once more, as the
// salt command does.
func (d *Driver) requestKeyed(ctx context.Context, load map[string]any, key string) (map[string]any, error) {
	reply, err := d.request(ctx, load)
	if err != nil || !refusedKey(reply) {
		return reply, err
	}
	nkey, rerr := d.readKey()
	if rerr != nil || nkey == key {
		if err := replyError(reply); err != nil {
			return nil, fmt.Errorf("%w (the key in %s is the one the master refused: is this user allowed to publish, publisher_acl?)", err, d.cfg.KeyFile)
		}
		return nil, errors.New("the master refused the request (no answer): is the key file current, and is this user allowed to publish (publisher_acl)?")
	}
	d.setKey(nkey)
	load["key"] = nkey
	return d.request(ctx, load)
}

// request sends one clear load and returns the decoded answer.
func (d *Driver) request(ctx context.Context, load map[string]any) (map[string]any, error) {
	body, err := msgpack.Marshal(map[string]any{"enc": "clear", "load": load, "version": 2})
	if err != nil {
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	var s *reqSocket
	select {
	case s = <-d.pool:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	raw, err := d.roundTrip(ctx, s, body)
	d.pool <- s
	if err != nil {
		return nil, err
	}
	var reply any
	if err := msgpack.Unmarshal(raw, &reply); err != nil {
		return nil, fmt.Errorf("decoding the answer: %w", err)
	}
	switch r := reply.(type) {
	case map[string]any:
		return r, nil
	case string, nil:
		return nil, nil // an empty answer: refused
	}
	return nil, fmt.Errorf("unexpected answer %T", reply)
}

// roundTrip sends body on s and waits for the reply; on a timeout or an
// error the socket is closed (a REQ socket cannot send again without its
// reply) and dialled again by the next request. A socket dialled by an
// earlier request that cannot send (its connection broke: the master
// restarted) is dialled again and the request sent on the new one at once.
func (d *Driver) roundTrip(ctx context.Context, s *reqSocket, body []byte) ([]byte, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, errors.New("the driver is closed")
	}
	fresh := s.sock == nil
	if fresh {
		sctx, stop := context.WithCancel(context.Background())
		sock := zmq4.NewReq(sctx, zmq4.WithDialerRetry(250*time.Millisecond), zmq4.WithDialerMaxRetries(2), zmq4.WithDialerTimeout(2*time.Second), zmq4.WithTimeout(d.cfg.Timeout))
		if err := sock.Dial(d.uri); err != nil {
			stop()
			return nil, actions.Retryable(fmt.Errorf("connecting to the master at %s: %w", d.uri, err))
		}
		s.sock, s.ctx, s.stop = sock, sctx, stop
	}
	if err := s.sock.Send(zmq4.NewMsg(body)); err != nil {
		s.reset()
		if !fresh {
			// The connection this socket made earlier is gone (the master
			// restarted, and the pool's other sockets are as stale): the
			// request did not go out. Dial again and send it once more.
			return d.roundTrip(ctx, s, body)
		}
		return nil, actions.Retryable(fmt.Errorf("sending to %s: %w", d.uri, err))
	}
	actions.Sent(ctx) // written: the lane may begin its next call
	type result struct {
		msg zmq4.Msg
		err error
	}
	ch := make(chan result, 1)
	sock := s.sock // reset may clear s.sock while Recv waits
	go func() { m, err := sock.Recv(); ch <- result{m, err} }()
	timer := time.NewTimer(d.cfg.Timeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		if r.err != nil {
			s.reset()
			return nil, fmt.Errorf("reading the answer from %s: %w: outcome unknown (the request went out; not sent again)", d.uri, r.err)
		}
		if len(r.msg.Frames) == 0 {
			return nil, nil
		}
		return r.msg.Frames[len(r.msg.Frames)-1], nil
	case <-timer.C:
		// The request went out: the master may have published the job.
		// Not retried, so that no job runs twice; the reaction goes to
		// the dead letter with this error.
		s.reset()
		return nil, fmt.Errorf("no answer from the master at %s within %s: outcome unknown (the job may have been published; not sent again)", d.uri, d.cfg.Timeout)
	case <-ctx.Done():
		s.reset()
		return nil, fmt.Errorf("%w before the master answered: outcome unknown (the request went out; not sent again)", ctx.Err())
	}
}

// reset closes the socket; the next request dials again.
func (s *reqSocket) reset() {
	if s.sock != nil {
		_ = s.sock.Close()
		s.stop()
	}
	s.sock, s.stop = nil, nil
}

// Probe implements actions.Prober: the key file must be readable (its
// key is taken, as the master may have written a new one) and the
// master's request port must take a connection. It sends the master
// nothing: a probe must not publish.
func (d *Driver) Probe(ctx context.Context) error {
	key, err := d.readKey()
	if err != nil {
		return err
	}
	d.setKey(key)
	if d.engine != nil {
		_ = d.engine.Check(ctx) // not a failure: runners then go the master's way
	}
	addr := strings.TrimPrefix(d.uri, "tcp://")
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("master driver: the master's request server %s does not answer: %w", d.uri, err)
	}
	return c.Close()
}

// Close implements actions.Driver: it closes every socket.
func (d *Driver) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	var err error
	if d.engine != nil {
		err = d.engine.Close(ctx)
	}
	for range d.cfg.Sockets {
		select {
		case s := <-d.pool:
			s.reset()
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
	}
	return err
}

// replyError is the error a master's answer carries ({"error": ...}).
func replyError(reply map[string]any) error {
	e, ok := reply["error"]
	if !ok {
		if body, ok := reply["load"].(map[string]any); ok {
			e, ok = body["error"]
			if !ok {
				return nil
			}
		} else {
			return nil
		}
	}
	if m, ok := e.(map[string]any); ok {
		return fmt.Errorf("the master refused: %v: %v", m["name"], m["message"])
	}
	return fmt.Errorf("the master refused: %v", e)
}

// refusedKey reports the master's answers to a key it does not take: an
// AuthenticationError (3006, 3007), or nothing at all (older releases,
// which the salt command still expects).
func refusedKey(reply map[string]any) bool {
	if len(reply) == 0 {
		return true
	}
	e, _ := reply["error"].(map[string]any)
	name, _ := e["name"].(string)
	return strings.HasSuffix(name, "AuthenticationError") // publish: AuthenticationError; runner: UserAuthenticationError
}

// plain turns event values into what msgpack encodes as Salt expects:
// ordered maps become plain maps, lists stay lists.
func plain(v any) any {
	switch x := v.(type) {
	case *event.Map:
		if x == nil {
			return map[string]any{}
		}
		m := make(map[string]any, x.Len())
		for i := 0; i < x.Len(); i++ {
			k, e := x.At(i)
			m[k] = plain(e)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	}
	return v
}

func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case int64:
		return int(n), true
	case int:
		return n, true
	case float64:
		return int(n), true
	}
	return 0, false
}

var (
	_ actions.Driver = (*Driver)(nil)
	_ actions.Prober = (*Driver)(nil)
)
