# C declarations of hwloc 2.x (<hwloc.h>, <hwloc/distances.h>) used by nezha/_core/hwloc.pyx.
# Only the fields read are declared; the C compiler resolves their types from the header.


cdef extern from "hwloc.h" nogil:
    enum: HWLOC_API_VERSION
    unsigned hwloc_get_api_version()

    ctypedef enum hwloc_obj_type_t:
        HWLOC_OBJ_PCI_DEVICE
        HWLOC_OBJ_BRIDGE
        HWLOC_OBJ_OS_DEVICE

    ctypedef enum hwloc_type_filter_e:
        HWLOC_TYPE_FILTER_KEEP_ALL
        HWLOC_TYPE_FILTER_KEEP_IMPORTANT

    ctypedef enum hwloc_topology_flags_e:
        HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM

    ctypedef enum hwloc_obj_bridge_type_t:
        HWLOC_OBJ_BRIDGE_HOST
        HWLOC_OBJ_BRIDGE_PCI

    struct hwloc_pcidev_attr_s:
        unsigned domain
        unsigned char bus, dev, func
        unsigned short class_id
        unsigned short vendor_id, device_id
        float linkspeed

    struct hwloc_bridge_attr_s:
        hwloc_pcidev_attr_s upstream_pci "upstream.pci"
        hwloc_obj_bridge_type_t upstream_type
        unsigned char depth

    struct hwloc_osdev_attr_s:
        int type

    union hwloc_obj_attr_u:
        hwloc_pcidev_attr_s pcidev
        hwloc_bridge_attr_s bridge
        hwloc_osdev_attr_s osdev

    struct hwloc_info_s:
        char *name
        char *value

    struct hwloc_bitmap_s:
        pass
    ctypedef hwloc_bitmap_s *hwloc_bitmap_t
    ctypedef const hwloc_bitmap_s *hwloc_const_bitmap_t

    struct hwloc_obj:
        hwloc_obj_type_t type
        char *subtype
        unsigned os_index
        char *name
        hwloc_obj_attr_u *attr
        unsigned logical_index
        hwloc_obj *parent
        hwloc_obj *next_sibling
        hwloc_obj *first_child
        hwloc_obj *memory_first_child
        hwloc_obj *io_first_child
        hwloc_bitmap_t cpuset
        hwloc_bitmap_t nodeset
        hwloc_info_s *infos
        unsigned infos_count
    ctypedef hwloc_obj *hwloc_obj_t

    struct hwloc_topology:
        pass
    ctypedef hwloc_topology *hwloc_topology_t

    int hwloc_topology_init(hwloc_topology_t *topologyp)
    int hwloc_topology_load(hwloc_topology_t topology)
    void hwloc_topology_destroy(hwloc_topology_t topology)
    int hwloc_topology_set_xml(hwloc_topology_t topology, const char *xmlpath)
    int hwloc_topology_set_flags(hwloc_topology_t topology, unsigned long flags)
    int hwloc_topology_set_io_types_filter(hwloc_topology_t topology, hwloc_type_filter_e filter)
    int hwloc_topology_is_thissystem(hwloc_topology_t topology)
    hwloc_obj_t hwloc_get_root_obj(hwloc_topology_t topology)
    const char *hwloc_obj_type_string(hwloc_obj_type_t type)

    int hwloc_bitmap_first(hwloc_const_bitmap_t bitmap)
    int hwloc_bitmap_next(hwloc_const_bitmap_t bitmap, int prev)
    int hwloc_bitmap_weight(hwloc_const_bitmap_t bitmap)


cdef extern from "hwloc/distances.h" nogil:
    enum: HWLOC_DISTANCES_KIND_MEANS_LATENCY
    enum: HWLOC_DISTANCES_KIND_MEANS_BANDWIDTH

    struct hwloc_distances_s:
        unsigned nbobjs
        hwloc_obj_t *objs
        unsigned long kind
        unsigned long long *values

    int hwloc_distances_get(hwloc_topology_t topology, unsigned *nr,
                            hwloc_distances_s **distances, unsigned long kind,
                            unsigned long flags)
    const char *hwloc_distances_get_name(hwloc_topology_t topology, hwloc_distances_s *distances)
    void hwloc_distances_release(hwloc_topology_t topology, hwloc_distances_s *distances)
