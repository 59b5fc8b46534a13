package engine

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/llmgw/llmgw/plugins/engine/internal/proto"
)

// GRPCPlugin is the go-plugin glue for Engine. Plugins set Impl; the host
// leaves it nil and receives an Engine from Client.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Engine
}

// GRPCServer registers the engine service.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterEngineServer(s, &grpcServer{impl: p.Impl})
	return nil
}

// GRPCClient returns an Engine backed by the connection.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &grpcClient{c: pb.NewEngineClient(c)}, nil
}

type grpcClient struct{ c pb.EngineClient }

func (g *grpcClient) Info(ctx context.Context) (Info, error) {
	r, err := g.c.Info(ctx, &pb.InfoRequest{})
	if err != nil {
		return Info{}, fromStatus(err)
	}
	info := Info{Type: r.Type, Version: r.Version, Protocol: ProtocolVersion,
		Capabilities: r.Capabilities, Formats: r.Formats, ReservedArgs: r.ReservedArgs, ArgFlags: r.ArgFlags, Example: r.Example}
	for _, o := range r.Options {
		info.Options = append(info.Options, Option{Name: o.GetName(), Type: o.GetType(), Description: o.GetDescription(),
			Required: o.GetRequired(), Secret: o.GetSecret(), Example: o.GetExample()})
	}
	return info, nil
}

func (g *grpcClient) Start(ctx context.Context, s ReplicaSpec) (Replica, error) {
	r, err := g.c.Start(ctx, &pb.StartRequest{
		Model: s.Model, ReplicaId: s.ReplicaID, Source: s.Source, Args: s.Args,
		Options: s.Options, ContextLength: s.ContextLength, Concurrency: s.Concurrency,
		Memory: s.Memory, Cores: int32(s.Cores), Gpus: int32(s.GPUs), Cpus: ints[int32](s.CPUs),
		Adapters:   toPBAdapters(s.Adapters),
		GpuDevices: ints[int32](s.GPUDevices),
	})
	if err != nil {
		return Replica{}, fromStatus(err)
	}
	rep := r.GetReplica()
	return Replica{ID: rep.GetId(), BaseURL: rep.GetBaseUrl(), PID: rep.GetPid(),
		Headers: rep.GetHeaders(), UpstreamModel: rep.GetUpstreamModel(), HealthURL: rep.GetHealthUrl(),
		Adapters: rep.GetAdapters()}, nil
}

// Adopt asks the plugin to take over r; a plugin without Adopt answers
// Unimplemented, which is ErrAdoptUnsupported here.
func (g *grpcClient) Adopt(ctx context.Context, r Replica) error {
	_, err := g.c.Adopt(ctx, &pb.AdoptRequest{Replica: toPBReplica(r)})
	if status.Code(err) == codes.Unimplemented {
		return ErrAdoptUnsupported
	}
	return fromStatus(err)
}

func toPBReplica(r Replica) *pb.Replica {
	return &pb.Replica{Id: r.ID, BaseUrl: r.BaseURL, Pid: r.PID, Headers: r.Headers,
		UpstreamModel: r.UpstreamModel, HealthUrl: r.HealthURL, Adapters: r.Adapters}
}

func toPBAdapters(as []Adapter) []*pb.Adapter {
	var out []*pb.Adapter
	for _, a := range as {
		out = append(out, &pb.Adapter{Name: a.Name, Path: a.Path, Scale: a.Scale})
	}
	return out
}

func fromPBAdapters(as []*pb.Adapter) []Adapter {
	var out []Adapter
	for _, a := range as {
		out = append(out, Adapter{Name: a.GetName(), Path: a.GetPath(), Scale: a.GetScale()})
	}
	return out
}

func (g *grpcClient) Status(ctx context.Context, id string) (Status, error) {
	r, err := g.c.Status(ctx, &pb.StatusRequest{ReplicaId: id})
	if err != nil {
		return Status{}, fromStatus(err)
	}
	return Status{State: r.State, Message: r.Message, PID: r.Pid, Inflight: r.Inflight}, nil
}

func (g *grpcClient) Stop(ctx context.Context, id string, grace time.Duration) error {
	_, err := g.c.Stop(ctx, &pb.StopRequest{ReplicaId: id, GraceMs: grace.Milliseconds()})
	return fromStatus(err)
}

type grpcServer struct {
	pb.UnimplementedEngineServer
	impl Engine
}

func (g *grpcServer) Info(ctx context.Context, _ *pb.InfoRequest) (*pb.InfoResponse, error) {
	i, err := g.impl.Info(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	r := &pb.InfoResponse{Type: i.Type, Version: i.Version, Capabilities: i.Capabilities, Formats: i.Formats,
		ReservedArgs: i.ReservedArgs, ArgFlags: i.ArgFlags, Example: i.Example}
	for _, o := range i.Options {
		r.Options = append(r.Options, &pb.Option{Name: o.Name, Type: o.Type, Description: o.Description,
			Required: o.Required, Secret: o.Secret, Example: o.Example})
	}
	return r, nil
}

func (g *grpcServer) Start(ctx context.Context, r *pb.StartRequest) (*pb.StartResponse, error) {
	rep, err := g.impl.Start(ctx, ReplicaSpec{
		Model: r.Model, ReplicaID: r.ReplicaId, Source: r.Source, Args: r.Args,
		Options: r.Options, ContextLength: r.ContextLength, Concurrency: r.Concurrency,
		Memory: r.Memory, Cores: int(r.Cores), GPUs: int(r.Gpus), CPUs: ints[int](r.Cpus),
		Adapters:   fromPBAdapters(r.Adapters),
		GPUDevices: ints[int](r.GpuDevices),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.StartResponse{Replica: toPBReplica(rep)}, nil
}

func (g *grpcServer) Adopt(ctx context.Context, r *pb.AdoptRequest) (*pb.AdoptResponse, error) {
	rep := r.GetReplica()
	err := Adopt(ctx, g.impl, Replica{ID: rep.GetId(), BaseURL: rep.GetBaseUrl(), PID: rep.GetPid(),
		Headers: rep.GetHeaders(), UpstreamModel: rep.GetUpstreamModel(), HealthURL: rep.GetHealthUrl(),
		Adapters: rep.GetAdapters()})
	if errors.Is(err, ErrAdoptUnsupported) {
		return nil, status.Error(codes.Unimplemented, err.Error())
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.AdoptResponse{}, nil
}

func (g *grpcServer) Status(ctx context.Context, r *pb.StatusRequest) (*pb.StatusResponse, error) {
	s, err := g.impl.Status(ctx, r.ReplicaId)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.StatusResponse{State: s.State, Message: s.Message, Pid: s.PID, Inflight: s.Inflight}, nil
}

func (g *grpcServer) Stop(ctx context.Context, r *pb.StopRequest) (*pb.StopResponse, error) {
	if err := g.impl.Stop(ctx, r.ReplicaId, time.Duration(r.GraceMs)*time.Millisecond); err != nil {
		return nil, toStatus(err)
	}
	return &pb.StopResponse{}, nil
}

func toStatus(err error) error {
	if errors.Is(err, ErrUnknownReplica) {
		return status.Error(codes.NotFound, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	s, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch s.Code() {
	case codes.NotFound:
		return ErrUnknownReplica
	case codes.Unavailable:
		// The transport's message names the plugin's socket: the caller
		// learns what happened, not where.
		return ErrUnavailable
	}
	return errors.New(s.Message())
}

// ErrUnavailable is the error of a call to a plugin that does not answer
// (it exited, or is being restarted).
var ErrUnavailable = errors.New("the engine plugin does not answer (it exited or is being restarted); try again shortly")

// ints converts a list of CPU numbers between the protocol's int32 and Go's int.
func ints[U, T int | int32](in []T) []U {
	if len(in) == 0 {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = U(v)
	}
	return out
}
