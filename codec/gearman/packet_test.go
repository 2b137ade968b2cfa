package gearman

import (
	"bytes"
	"testing"
)

func TestAccessorsEveryType(t *testing.T) {
	typs, args, frames := allTypes()
	for i, typ := range typs {
		var p Packet
		if err := p.UnmarshalBinary(frames[i]); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		for j := range args[i] {
			f := typ.ArgField(j)
			if got := p.Field(f); string(got) != args[i][j] {
				t.Errorf("%s: Field(%s) = %q, want %q", typ, f, got, args[i][j])
			}
		}
		for _, c := range []struct {
			f   Field
			got []byte
		}{
			{FieldHandle, p.Handle()}, {FieldFunction, p.Function()}, {FieldUnique, p.Unique()},
			{FieldData, p.Data()}, {FieldReducer, p.Reducer()},
		} {
			i := typ.ArgIndex(c.f)
			if (i < 0) != (c.got == nil) || (i >= 0 && !bytes.Equal(c.got, p.Args[i])) {
				t.Errorf("%s: accessor for %s = %q (index %d)", typ, c.f, c.got, i)
			}
		}
	}
	// Accessors never panic on a short Args.
	p := Packet{Magic: Req, Type: SubmitJob, Args: [][]byte{[]byte("fn")}}
	if p.Data() != nil || p.Unique() != nil || string(p.Function()) != "fn" || p.Arg(-1) != nil {
		t.Error("short Args")
	}
}

func TestClone(t *testing.T) {
	r := NewReader(bytes.NewReader(cat(req(7, "fn\x00u\x00data"), req(7, "XX\x00Y\x00ZZZZ"))), Limits{})
	f, _ := r.ReadFrame()
	c := f.Packet.Clone()
	r.ReadFrame() // overwrites the buffer f aliases
	if c.String() != `REQ SUBMIT_JOB ["fn" "u" "data"]` {
		t.Errorf("clone changed: %s", c.String())
	}
	_ = append(c.Args[0], "!!!"...)
	if string(c.Args[1]) != "u" {
		t.Errorf("appending to one argument overwrote the next: %q", c.Args[1])
	}
	if z := (&Packet{Magic: Res, Type: Noop}).Clone(); z.Args != nil || z.Type != Noop {
		t.Errorf("clone of no args: %+v", z)
	}
}

// TestArgsDoNotOverlap: appending to a decoded argument cannot overwrite the
// next argument or frame in the Reader's buffer.
func TestArgsDoNotOverlap(t *testing.T) {
	r := NewReader(bytes.NewReader(req(11, "H\x00fn\x00data")), Limits{})
	f, err := r.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	_ = append(f.Packet.Args[0], 'X')
	_ = append(f.Packet.Args, []byte("extra"))
	if f.String() != `REQ JOB_ASSIGN ["H" "fn" "data"]` {
		t.Errorf("got %s", f.String())
	}
}

func TestUnmarshalReusesArgs(t *testing.T) {
	p := Packet{Args: make([][]byte, 0, MaxArgs)}
	backing := &p.Args[:1][0]
	if err := p.UnmarshalBinary(req(7, "a\x00b\x00c")); err != nil {
		t.Fatal(err)
	}
	if &p.Args[0] != backing {
		t.Error("Args' backing array not reused")
	}
}

func TestPacketString(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 100)
	p := Packet{Magic: Res, Type: WorkData, Args: [][]byte{[]byte("H:1"), long}}
	want := `RES WORK_DATA ["H:1" "` + string(long[:64]) + `"...100B]`
	if got := p.String(); got != want {
		t.Errorf("got %s", got)
	}
}
