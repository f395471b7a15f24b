package protocol

import "encoding/json"

// ResultTypeInputRequired is the resultType of a 2026-07-28 result that
// asks the client for answers first (an MRTR round); a result that is the
// answer itself is "complete" (DecorateResult).
const ResultTypeInputRequired = "input_required"

// InputRequiredResult is a 2026-07-28 answer that asks the client for
// input before the request can complete: one MRTR round. The client puts
// each of InputRequests to its user (or its own handlers) and sends the
// request again with the answers under the same keys in inputResponses
// and RequestState unchanged.
//
// The members are declared in the order encoding/json writes a map's, so
// the encoding is the same whether or not the result is decorated (see
// DecorateResult) afterwards.
type InputRequiredResult struct {
	// InputRequests are the questions by key, each a request object
	// ({"method": …, "params": …}; see InputRequest). They are kept
	// encoded because a tool's questions (a downstream server's) pass
	// through exactly as the tool gave them.
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	// RequestState is the opaque state the retry brings back; troupe's
	// is sealed (gate/approvalstate).
	RequestState string `json:"requestState"`
	// ResultType is always ResultTypeInputRequired (NewInputRequired).
	ResultType string `json:"resultType"`
}

// NewInputRequired is the input_required result that asks requests under
// state.
func NewInputRequired(requests map[string]json.RawMessage, state string) *InputRequiredResult {
	return &InputRequiredResult{InputRequests: requests, RequestState: state, ResultType: ResultTypeInputRequired}
}

// InputRequest is one question of an InputRequiredResult: a request the
// server would send the client in the handshake era (elicitation/create,
// sampling/createMessage, roots/list), asked inside the result instead.
type InputRequest struct {
	Method string `json:"method"`
	Params any    `json:"params"`
}

// ElicitInputRequest is an elicitation/create question in form mode,
// encoded for InputRequiredResult.InputRequests.
func ElicitInputRequest(params *ElicitRequestParams) (json.RawMessage, error) {
	return json.Marshal(InputRequest{Method: MethodElicitationCreate, Params: params})
}
