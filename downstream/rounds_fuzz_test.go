package downstream

import (
	"encoding/json"
	"testing"
)

// FuzzRounds feeds a downstream server's tools/call answer (any bytes)
// through what the client does with it in the stateless revision: read it
// as an input_required result, keep its requestState in the round's state,
// and build the retry's params. Nothing panics, and a retry's params are
// always a JSON object that carries the answers and, exactly when the
// server sent one, its state.
func FuzzRounds(f *testing.F) {
	for _, s := range []string{
		`{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"message":"m"}}},"requestState":"s"}`,
		`{"resultType":"input_required","requestState":""}`,
		`{"resultType":"input_required","inputRequests":null}`,
		`{"resultType":"complete","content":[]}`,
		`{"resultType":"input_required","requestState":7}`,
		`[]`, `null`, `"x"`,
	} {
		f.Add([]byte(s), []byte(`{"a":{"action":"accept"}}`))
	}
	f.Fuzz(func(t *testing.T, result, answers []byte) {
		ir, ok := asInputRequired(json.RawMessage(result))
		if !ok {
			return
		}
		st := roundState{}
		if ir.RequestState != nil {
			st.Server, st.HasServer = *ir.RequestState, true
		}
		var back roundState
		if err := json.Unmarshal([]byte(st.encode()), &back); err != nil || back != st {
			t.Fatalf("round state %+v came back as %+v (%v)", st, back, err)
		}
		var responses map[string]json.RawMessage
		if json.Unmarshal(answers, &responses) != nil {
			return
		}
		base, err := callParams("tool", nil, "troupe-1", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		params, err := withRound(base, &Resume{Responses: responses}, &back)
		if err != nil {
			return
		}
		var p struct {
			InputResponses map[string]json.RawMessage `json:"inputResponses"`
			RequestState   *string                    `json:"requestState"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			t.Fatalf("retry params are not JSON: %s (%v)", params, err)
		}
		if (p.RequestState != nil) != st.HasServer || (p.RequestState != nil && *p.RequestState != st.Server) {
			t.Fatalf("retry state %v, server sent %+v", p.RequestState, st)
		}
	})
}
