package auth

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	bscodec "github.com/jobgate/jobgate/codec/beanstalk"
	gmcodec "github.com/jobgate/jobgate/codec/gearman"
)

func TestParseTokens(t *testing.T) {
	type parser func([]byte) ([]byte, bool)
	for _, tc := range []struct {
		name   string
		parse  parser
		in     string
		token  string // "" for nil
		claims bool
	}{
		{"use: token", ParseBeanstalkToken, "jobgate-auth." + tokOps, tokOps, true},
		{"use: ordinary tube", ParseBeanstalkToken, "emails", "", false},
		{"use: prefix without dot", ParseBeanstalkToken, "jobgate-auth", "", false},
		{"use: empty token", ParseBeanstalkToken, "jobgate-auth.", "", true},
		{"use: short token", ParseBeanstalkToken, "jobgate-auth.abc", "", true},
		{"use: case matters", ParseBeanstalkToken, "Jobgate-Auth." + tokOps, "", false},
		{"option: token", ParseGearmanOption, "auth=" + tokBilling, tokBilling, true},
		{"option: exceptions", ParseGearmanOption, "exceptions", "", false},
		{"option: bad byte", ParseGearmanOption, "auth=" + tokBilling + "\x00", "", true},
		{"option: space", ParseGearmanOption, "auth= " + tokBilling, "", true},
		{"option: too long", ParseGearmanOption, "auth=" + strings.Repeat("a", MaxTokenLen+1), "", true},
		{"option: longest", ParseGearmanOption, "auth=" + strings.Repeat("a", MaxTokenLen), strings.Repeat("a", MaxTokenLen), true},
		{"client id: token", ParseGearmanClientID, "jobgate-auth." + tokShared, tokShared, true},
		{"client id: worker name", ParseGearmanClientID, "worker-7", "", false},
	} {
		tok, claims := tc.parse([]byte(tc.in))
		if claims != tc.claims || string(tok) != tc.token || (tc.token == "") != (tok == nil) {
			t.Errorf("%s: got %q, %v; want %q, %v", tc.name, tok, claims, tc.token, tc.claims)
		}
	}
	if !IsReservedTube([]byte("jobgate-auth.x")) || IsReservedTube([]byte("jobgate")) {
		t.Error("IsReservedTube")
	}
}

// TestTokenFitsTube: every valid token makes a tube name the Beanstalk
// codec accepts, so "use jobgate-auth.<token>" always parses.
func TestTokenFitsTube(t *testing.T) {
	for _, tok := range []string{tokOps, tokBilling, strings.Repeat("(", MaxTokenLen)} {
		if !validToken([]byte(tok)) || !bscodec.ValidName([]byte(TokenPrefix+tok)) {
			t.Errorf("%q", tok)
		}
	}
}

func TestBeanstalkTables(t *testing.T) {
	for v, want := range map[bscodec.Verb]Need{
		bscodec.Put:                {Produce, UsedTube},
		bscodec.Use:                {None, NoName},
		bscodec.Watch:              {Consume, ArgName},
		bscodec.Ignore:             {None, NoName},
		bscodec.Reserve:            {Consume, WatchedTubes},
		bscodec.ReserveWithTimeout: {Consume, WatchedTubes},
		bscodec.ReserveJob:         {Consume, JobTube},
		bscodec.Delete:             {Consume, JobTube},
		bscodec.Release:            {None, NoName},
		bscodec.Bury:               {None, NoName},
		bscodec.Touch:              {None, NoName},
		bscodec.Peek:               {Consume, JobTube},
		bscodec.PeekReady:          {Consume, UsedTube},
		bscodec.PeekDelayed:        {Consume, UsedTube},
		bscodec.PeekBuried:         {Consume, UsedTube},
		bscodec.Kick:               {Consume, UsedTube},
		bscodec.KickJob:            {Consume, JobTube},
		bscodec.StatsJob:           {Consume, JobTube},
		bscodec.StatsTube:          {Observe, ArgName},
		bscodec.Stats:              {Admin, NoName},
		bscodec.ListTubes:          {Admin, NoName},
		bscodec.ListTubeUsed:       {None, NoName},
		bscodec.ListTubesWatched:   {None, NoName},
		bscodec.PauseTube:          {Admin, NoName},
		bscodec.Quit:               {None, NoName},
	} {
		if got := BeanstalkNeed(v); got != want {
			t.Errorf("BeanstalkNeed(%v) = %v, want %v", v, got, want)
		}
	}
	// Hard denials answer NOT_FOUND; use/watch/ignore are soft.
	for v := bscodec.Put; v <= bscodec.Quit; v++ {
		want := BeanstalkDenied
		if v == bscodec.Use || v == bscodec.Watch || v == bscodec.Ignore {
			want = ""
		}
		if got := BeanstalkDenial(v); got != want {
			t.Errorf("BeanstalkDenial(%v) = %q, want %q", v, got, want)
		}
	}
	if BeanstalkDenied != "NOT_FOUND\r\n" {
		t.Errorf("BeanstalkDenied %q", BeanstalkDenied)
	}
}

func TestGearmanTables(t *testing.T) {
	produce := []gmcodec.Type{gmcodec.SubmitJob, gmcodec.SubmitJobBg, gmcodec.SubmitJobHigh, gmcodec.SubmitJobHighBg,
		gmcodec.SubmitJobLow, gmcodec.SubmitJobLowBg, gmcodec.SubmitJobSched, gmcodec.SubmitJobEpoch,
		gmcodec.SubmitReduceJob, gmcodec.SubmitReduceJobBackground}
	consume := []gmcodec.Type{gmcodec.CanDo, gmcodec.CanDoTimeout}
	for typ := gmcodec.Type(1); typ <= gmcodec.StatusResUnique; typ++ {
		want := Need{None, NoName}
		for _, p := range produce {
			if typ == p {
				want = Need{Produce, ArgName}
			}
		}
		for _, c := range consume {
			if typ == c {
				want = Need{Consume, ArgName}
			}
		}
		if got := GearmanNeed(typ); got != want {
			t.Errorf("GearmanNeed(%v) = %v, want %v", typ, got, want)
		}
		// Every request type whose Need names a function has the
		// function as an argument to take it from.
		if want.Name == ArgName && typ.ArgField(0) != gmcodec.FieldFunction {
			t.Errorf("%v: first argument is %v", typ, typ.ArgField(0))
		}
	}
	if GearmanAdminNeed != (Need{Admin, NoName}) {
		t.Error("GearmanAdminNeed")
	}
	// The admin denial has gearmand's admin error shape.
	if !strings.HasPrefix(GearmanAdminDenied, "ERR PERMISSION_DENIED ") || strings.Count(GearmanAdminDenied, " ") != 2 ||
		!strings.HasSuffix(GearmanAdminDenied, "\r\n") {
		t.Errorf("%q", GearmanAdminDenied)
	}
}

// TestGearmanDenialPacket encodes the denial ERROR packet with the codec:
// it must be a valid packet.
func TestGearmanDenialPacket(t *testing.T) {
	var buf strings.Builder
	w := gmcodec.NewWriter(&buf)
	if err := w.WriteError(GearmanDeniedCode, GearmanDeniedText); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	want := "\x00RES\x00\x00\x00\x13" + string([]byte{0, 0, 0, byte(len(GearmanDeniedCode) + 1 + len(GearmanDeniedText))}) +
		"PERMISSION_DENIED\x00" + GearmanDeniedText
	if buf.String() != want {
		t.Errorf("got %q\nwant %q", buf.String(), want)
	}
}

func TestLogDenied(t *testing.T) {
	var out strings.Builder
	log := slog.New(slog.NewTextHandler(&out, nil))
	p := mustNew(t, testConfig(t))
	id := p.Identify(Peer{Token: []byte(tokBilling)})
	remote := netip.MustParseAddrPort("10.9.8.7:5555")
	LogDenied(context.Background(), log, id, remote, Produce, []byte("payroll"), Deny)
	LogBadToken(context.Background(), log, Anonymous, remote, 20)
	got := out.String()
	for _, want := range []string{"auth: denied", "identity.name=billing", "identity.method=token", "remote=10.9.8.7:5555",
		"action=produce", "name=payroll", "decision=denied", "auth: unknown token", "identity.name=anonymous", "token_len=20"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, tokBilling) {
		t.Error("token logged")
	}
	LogDenied(context.Background(), nil, id, remote, Produce, nil, Deny) // no panic
}
