// Package jsonvalue decodes JSON into the values encoding/json gives an
// `any` (map[string]any, []any, string, bool, nil, and json.Number as with
// Decoder.UseNumber), and encodes such values and strings, in one pass
// each and without reflection, with exactly encoding/json's results.
//
// It exists for the JSON path of one tools/call: the call's arguments are
// decoded once (Decode), validated against the tool's schema, and the same
// value is encoded canonically (AppendCanonical) into the hash an approval
// and the audit record bind; the audit log's records are written with
// AppendString. Those hashes and lines were first made with encoding/json,
// and sealed approvals and written logs depend on them staying byte for
// byte the same: the tests fuzz every function here against encoding/json.
package jsonvalue
