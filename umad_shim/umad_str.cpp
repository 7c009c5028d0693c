// umad_str.h: names of management classes, methods, attributes and MAD
// status codes (IBA 13.4), for programs that print MADs. Only the common
// values are named; others print as "<unknown>", which the real library
// also does for values it does not know.
#include <infiniband/umad_str.h>
#include <infiniband/umad_types.h>

#include <endian.h>

#include <cstdint>

extern "C" {

const char* umad_class_str(uint8_t mgmt_class) {
  switch (mgmt_class) {
    case 0x01: return "Subn";
    case 0x81: return "SubnDirectedRoute";
    case 0x03: return "SubnAdmin";
    case 0x04: return "Perf";
    case 0x05: return "BM";
    case 0x06: return "DevMgt";
    case 0x07: return "ComMgt";
    case 0x08: return "SNMP";
    default: return "<unknown>";
  }
}

const char* umad_method_str(uint8_t mgmt_class, uint8_t method) {
  (void)mgmt_class;
  switch (method) {
    case 0x01: return "Get";
    case 0x02: return "Set";
    case 0x81: return "GetResp";
    case 0x03: return "Send";
    case 0x05: return "Trap";
    case 0x06: return "Report";
    case 0x86: return "ReportResp";
    case 0x07: return "TrapRepress";
    case 0x12: return "GetTable";
    case 0x92: return "GetTableResp";
    case 0x15: return "Delete";
    case 0x95: return "DeleteResp";
    default: return "<unknown>";
  }
}

const char* umad_attribute_str(uint8_t mgmt_class, __be16 attr_id) {
  if (mgmt_class != 0x01 && mgmt_class != 0x81) return attr_id == htobe16(0x0001) ? "ClassPortInfo" : "<unknown>";
  switch (be16toh(attr_id)) {
    case 0x0002: return "Notice";
    case 0x0010: return "NodeDescription";
    case 0x0011: return "NodeInfo";
    case 0x0012: return "SwitchInfo";
    case 0x0014: return "GUIDInfo";
    case 0x0015: return "PortInfo";
    case 0x0016: return "P_KeyTable";
    case 0x0017: return "SLtoVLMappingTable";
    case 0x0018: return "VLArbitrationTable";
    case 0x0019: return "LinearForwardingTable";
    case 0x0020: return "SMInfo";
    default: return "<unknown>";
  }
}

const char* umad_common_mad_status_str(__be16 status) {
  const uint16_t s = be16toh(status);
  if ((s & 0x0001) != 0) return "Busy";
  if ((s & 0x0002) != 0) return "Redirection required";
  switch ((s >> 2) & 0x7) {
    case 0: return "Success";
    case 1: return "Bad Class and/or Base Version";
    case 2: return "Method not supported";
    case 3: return "Method/Attribute combo not supported";
    case 7: return "Invalid Attribute/Modifier field";
    default: return "Reserved";
  }
}

const char* umad_sa_mad_status_str(__be16 status) {
  switch ((be16toh(status) >> 8) & 0xff) {
    case 0: return "Success";
    case 1: return "No Resources";
    case 2: return "Request Denied";
    case 3: return "No Records";
    case 4: return "Too Many Records";
    case 5: return "Invalid GID";
    case 6: return "Insufficient Components";
    case 7: return "Request Denied, Priority";
    default: return "Undefined Error";
  }
}

}  // extern "C"
