package filter

import (
	"errors"
	"fmt"

	"golang.org/x/net/bpf"

	"github.com/rocescope/rocescope/decode"
)

// Accept is the value a compiled program returns for a frame it matches:
// the most bytes a packet socket keeps of it (all of any frame).
const Accept = 262144

// links are the link types an expression applies to.
var links = []decode.LinkType{decode.LinkEthernet, decode.LinkLinuxSLL, decode.LinkLinuxSLL2, decode.LinkRaw, decode.LinkIPv4, decode.LinkIPv6}

// Expr is a compiled capture filter expression.
type Expr struct {
	text  string
	vlan  bool // the expression has a vlan primitive
	progs map[decode.LinkType]*program
}

// program is the expression compiled for one link type.
type program struct {
	insns []bpf.Instruction
	vm    *bpf.VM
}

// Compile compiles a capture filter expression in tcpdump's syntax (see
// the package documentation for the subset) for every link type it
// applies to. An error wraps ErrSyntax or ErrUnsupported and says what is
// wrong.
func Compile(text string) (*Expr, error) {
	return compile(text)
}

// compilePure compiles with this package's own compiler.
func compilePure(text string) (*Expr, error) {
	n, err := parse(text)
	if err != nil {
		return nil, err
	}
	e := &Expr{text: text, vlan: hasVLAN(n), progs: make(map[decode.LinkType]*program, len(links))}
	for _, link := range links {
		l, _ := layoutOf(link)
		t, err := lowerer{l}.lower(n)
		if err != nil {
			return nil, err
		}
		insns, err := generate(t)
		if err != nil {
			return nil, err
		}
		if err := e.add(link, insns); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// add keeps the program for link.
func (e *Expr) add(link decode.LinkType, insns []bpf.Instruction) error {
	vm, err := bpf.NewVM(insns)
	if err != nil {
		return fmt.Errorf("filter: %q: %w", e.text, err)
	}
	e.progs[link] = &program{insns: insns, vm: vm}
	return nil
}

func hasVLAN(n node) bool {
	switch n := n.(type) {
	case andNode:
		return hasVLAN(n.a) || hasVLAN(n.b)
	case orNode:
		return hasVLAN(n.a) || hasVLAN(n.b)
	case notNode:
		return hasVLAN(n.a)
	}
	return n.(prim).kind == "vlan"
}

// String returns the expression as given.
func (e *Expr) String() string { return e.text }

// VLAN reports whether the expression looks at VLAN tags (a vlan
// primitive). A packet socket sees a frame without the VLAN tag the NIC
// took out of it, so such an expression cannot run in its kernel filter
// with the meaning it has on the frame's bytes.
func (e *Expr) VLAN() bool { return e.vlan }

// Instructions returns the classic BPF program of the expression for
// frames of link type link, which returns Accept for a frame it matches
// and 0 for the others, or an error for a link type it does not apply to.
func (e *Expr) Instructions(link decode.LinkType) ([]bpf.Instruction, error) {
	p, ok := e.progs[link]
	if !ok {
		return nil, fmt.Errorf("filter: %q: does not apply to link type %d", e.text, link)
	}
	return append([]bpf.Instruction(nil), p.insns...), nil
}

// Match reports whether the frame data of link type link matches, running
// the program in user space. A frame of a link type the expression does
// not apply to does not match.
func (e *Expr) Match(data []byte, link decode.LinkType) bool {
	p, ok := e.progs[link]
	if !ok {
		return false
	}
	n, err := p.vm.Run(data)
	return err == nil && n > 0
}

// Labels of the two ends of a program.
const (
	labelAccept = "accept"
	labelReject = "reject"
)

// insn is an instruction of a program being generated: a plain one, a
// conditional jump to labels, or a label's place.
type insn struct {
	ins    bpf.Instruction
	cond   *bpf.JumpIf // when a conditional jump: to jt if true, to jf if false
	jt, jf string
	label  string // this instruction starts the label
}

// generator emits the program of a test.
type generator struct {
	out    []insn
	labels int
}

// generate compiles t into a program that returns Accept or 0.
func generate(t test) ([]bpf.Instruction, error) {
	g := &generator{}
	g.emit(t, labelAccept, labelReject)
	g.place(labelAccept)
	g.out = append(g.out, insn{ins: bpf.RetConstant{Val: Accept}})
	g.place(labelReject)
	g.out = append(g.out, insn{ins: bpf.RetConstant{Val: 0}})
	return g.resolve()
}

// newLabel returns a fresh label.
func (g *generator) newLabel() string {
	g.labels++
	return fmt.Sprintf("L%d", g.labels)
}

// place makes label name the next instruction.
func (g *generator) place(label string) {
	g.out = append(g.out, insn{label: label})
}

// emit appends the code of t, which goes on at label yes when t holds and
// at label no when not.
func (g *generator) emit(t test, yes, no string) {
	switch t := t.(type) {
	case allOf:
		g.chain(t, yes, no, true)
	case anyOf:
		g.chain(t, yes, no, false)
	case negate:
		g.emit(t.t, no, yes)
	case check:
		if t.afterIPv4 {
			// X = 4 * IHL, the length of the IPv4 header at t.ihlAt,
			// which t.off counts from.
			g.out = append(g.out, insn{ins: bpf.LoadMemShift{Off: t.ihlAt}})
			g.out = append(g.out, insn{ins: bpf.LoadIndirect{Off: t.off, Size: t.size}})
		} else {
			g.out = append(g.out, insn{ins: bpf.LoadAbsolute{Off: t.off, Size: t.size}})
		}
		if t.mask != 0 {
			g.out = append(g.out, insn{ins: bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: t.mask}})
		}
		g.out = append(g.out, insn{cond: &bpf.JumpIf{Cond: t.cond, Val: t.val}, jt: yes, jf: no})
	}
}

// chain emits the tests ts joined by and (all set) or by or: each test
// but the last goes on to the next one when it does not decide the whole.
// No test is true when all, false when not.
func (g *generator) chain(ts []test, yes, no string, all bool) {
	if len(ts) == 0 {
		end := no
		if all {
			end = yes
		}
		g.out = append(g.out, insn{ins: bpf.Jump{}, jt: end})
		return
	}
	for _, s := range ts[:len(ts)-1] {
		next := g.newLabel()
		if all {
			g.emit(s, next, no)
		} else {
			g.emit(s, yes, next)
		}
		g.place(next)
	}
	g.emit(ts[len(ts)-1], yes, no)
}

// resolve drops the label places and turns labels into jump offsets.
func (g *generator) resolve() ([]bpf.Instruction, error) {
	at := make(map[string]int)
	n := 0
	for _, in := range g.out {
		if in.label != "" {
			at[in.label] = n
			continue
		}
		n++
	}
	out := make([]bpf.Instruction, 0, n)
	for _, in := range g.out {
		if in.label != "" {
			continue
		}
		i := len(out)
		skip := func(label string) (uint32, error) {
			t, ok := at[label]
			if !ok || t <= i {
				return 0, fmt.Errorf("filter: internal error: no forward label %q", label)
			}
			return uint32(t - i - 1), nil
		}
		switch {
		case in.cond != nil:
			jt, err := skip(in.jt)
			if err != nil {
				return nil, err
			}
			jf, err := skip(in.jf)
			if err != nil {
				return nil, err
			}
			if jt > 255 || jf > 255 {
				return nil, errTooLong
			}
			j := *in.cond
			j.SkipTrue, j.SkipFalse = uint8(jt), uint8(jf)
			out = append(out, j)
		case in.jt != "":
			s, err := skip(in.jt)
			if err != nil {
				return nil, err
			}
			out = append(out, bpf.Jump{Skip: s})
		default:
			out = append(out, in.ins)
		}
	}
	if len(out) > maxInstructions {
		return nil, errTooLong
	}
	return out, nil
}

// maxInstructions is the most instructions a kernel takes in a classic
// BPF program (BPF_MAXINSNS).
const maxInstructions = 4096

var errTooLong = errors.New("filter: expression too long for a classic BPF program (a jump of more than 255 instructions, or more than 4096 of them)")
