// Package wire holds the protobuf messages troupe's nodes send each other
// over protoactor's remote (wire.proto; wire.pb.go is generated from it by
// scripts/genproto and committed). Package cluster sends and receives them;
// nothing else should.
package wire
