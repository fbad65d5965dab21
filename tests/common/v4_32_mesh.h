// The slice and mesh the partition-spec tests share: v4-32 (4 hosts of 4 devices,
// ids x + 2y + 4z) with create_device_mesh's data=4,fsdp=4, which is
// [[0,2,1,3],[4,6,5,7],[8,10,9,11],[12,14,13,15]] (device_mesh_test).
#pragma once

#include "cluster/accelerator_type.h"
#include "cluster/device_mesh.h"

namespace tpusim::testing {

struct V4_32Mesh {
  cluster::Topology topology = cluster::GenerateAcceleratorType("v4-32");
  cluster::DeviceMesh mesh =
      cluster::DeviceMesh::Create(topology, cluster::MeshGeneration(topology, "", "v4-32"),
                                  cluster::MeshSpec{cluster::ParseMeshAxes("data=4,fsdp=4", "test"), false});
};

}  // namespace tpusim::testing
