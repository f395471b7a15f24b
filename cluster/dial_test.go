package cluster

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

// fakeRemote answers the library's connection handshake: a ConnectResponse
// when accept, a message of another kind otherwise.
type fakeRemote struct {
	remote.UnimplementedRemotingServer
	accept bool
}

func (f *fakeRemote) Receive(s remote.Remoting_ReceiveServer) error {
	if _, err := s.Recv(); err != nil {
		return err
	}
	reply := &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectResponse{ConnectResponse: &remote.ConnectResponse{}}}
	if !f.accept {
		reply = &remote.RemoteMessage{MessageType: &remote.RemoteMessage_DisconnectRequest{DisconnectRequest: &remote.DisconnectRequest{}}}
	}
	if err := s.Send(reply); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// serveFake serves a fakeRemote (or, when f is nil, a gRPC server that
// knows no service) on a loopback port and returns its address.
func serveFake(t *testing.T, f *fakeRemote) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	if f != nil {
		remote.RegisterRemotingServer(srv, f)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// handshake does what the library's endpoint writer does on a ClientConn
// dialled with closeAbandonedConns: open the stream, send a
// ConnectRequest, read the answer.
func handshake(t *testing.T, addr string) (*grpc.ClientConn, error) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), closeAbandonedConns())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	stream, err := remote.NewRemotingClient(cc).Receive(ctx)
	if err != nil {
		return cc, err
	}
	if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{
		ConnectRequest: &remote.ConnectRequest{}}}); err != nil {
		return cc, err
	}
	m, err := stream.Recv()
	if err == nil && m.GetConnectResponse() == nil {
		return cc, errRefused
	}
	return cc, err
}

// errRefused is handshake's error when the peer answered with something
// else than a ConnectResponse.
var errRefused = errors.New("the peer refused the connection")

// TestFailedHandshakeClosesTheConn: the ClientConn of an attempt the
// library gives up (nobody listens, no remote there, the peer refuses) is
// closed, so it does not redial a dead node forever; an accepted one stays.
func TestFailedHandshakeClosesTheConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := ln.Addr().String()
	ln.Close()
	for name, addr := range map[string]string{
		"nobody listens": nobody,
		"not a remote":   serveFake(t, nil),
		"refused":        serveFake(t, &fakeRemote{accept: false}),
	} {
		cc, err := handshake(t, addr)
		if err == nil {
			t.Fatalf("%s: the handshake succeeded", name)
		}
		if s := cc.GetState(); s != connectivity.Shutdown {
			t.Errorf("%s: the abandoned ClientConn is %v, want closed", name, s)
		}
	}
	cc, err := handshake(t, serveFake(t, &fakeRemote{accept: true}))
	if err != nil {
		t.Fatalf("accepted handshake: %v", err)
	}
	if s := cc.GetState(); s == connectivity.Shutdown {
		t.Fatal("an established connection's ClientConn was closed")
	}
}
