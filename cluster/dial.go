package cluster

import (
	"context"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
)

// closeAbandonedConns is a dial option of the remote's connections to
// other nodes. protoactor's endpoint writer (at the only version the module
// proxy serves) dials a new grpc.ClientConn for each attempt to reach a
// node and, when the attempt fails (the node was killed, nobody listens at
// its address), drops it without closing it: the ClientConn lives on,
// redialing the dead address forever with its goroutines, four of them
// per writer that gave up (it tries five times and closes only the last).
// Every front that still sends to a lost node in the seconds before the
// membership drops it would leak them. The library's one stream per
// ClientConn is the connection handshake and then the node-to-node
// traffic; this option closes the ClientConn when that stream fails before
// the peer's ConnectResponse, the only case in which the library abandons
// it (an established connection's ClientConn the library closes itself).
func closeAbandonedConns() grpc.DialOption {
	return grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
		method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			_ = cc.Close()
			return nil, err
		}
		return &handshakeStream{ClientStream: s, cc: cc}, nil
	})
}

// handshakeStream is the library's stream until the peer accepted the
// connection: a failure before then closes the ClientConn.
type handshakeStream struct {
	grpc.ClientStream
	cc          *grpc.ClientConn
	established atomic.Bool
}

// SendMsg implements grpc.ClientStream.
func (s *handshakeStream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err != nil && !s.established.Load() {
		_ = s.cc.Close()
	}
	return err
}

// RecvMsg implements grpc.ClientStream.
func (s *handshakeStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if s.established.Load() {
		return err
	}
	if rm, ok := m.(*remote.RemoteMessage); err == nil && ok && rm.GetConnectResponse() != nil {
		s.established.Store(true)
		return nil
	}
	_ = s.cc.Close() // a failed or refused handshake: the library gives this ClientConn up
	return err
}
