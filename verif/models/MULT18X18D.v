// Simulation model of the ECP5 sysDSP primitive MULT18X18D, for the subset the MXU's PEs use
// (hw/arith/dsp.py): an 18 x 18 multiply, both operands signed (SIGNEDA = SIGNEDB = 1) or both
// unsigned, no input or pipeline registers, and the output register on CLK0 with clock enable CE0
// and synchronous reset RST0 (REG_OUTPUT_CLK = "CLK0", REG_OUTPUT_CE = "CE0", REG_OUTPUT_RST =
// "RST0", RESETMODE = "SYNC"), or no output register (REG_OUTPUT_CLK = "NONE"). Behaviour from
// Lattice TN1267 (ECP5 and ECP5-5G sysDSP Usage Guide). Other settings stop the simulation.
// Yosys and nextpnr-ecp5 use their own definition of the primitive; this file is never synthesized.
// The primitive's full interface, of which the model reads a part: no lint warnings for the rest.
/* verilator lint_off UNUSEDPARAM */
/* verilator lint_off UNUSEDSIGNAL */
module MULT18X18D #(
    parameter REG_INPUTA_CLK = "NONE", parameter REG_INPUTA_CE = "CE0", parameter REG_INPUTA_RST = "RST0",
    parameter REG_INPUTB_CLK = "NONE", parameter REG_INPUTB_CE = "CE0", parameter REG_INPUTB_RST = "RST0",
    parameter REG_INPUTC_CLK = "NONE", parameter REG_INPUTC_CE = "CE0", parameter REG_INPUTC_RST = "RST0",
    parameter REG_PIPELINE_CLK = "NONE", parameter REG_PIPELINE_CE = "CE0", parameter REG_PIPELINE_RST = "RST0",
    parameter REG_OUTPUT_CLK = "NONE", parameter REG_OUTPUT_CE = "CE0", parameter REG_OUTPUT_RST = "RST0",
    parameter CLK0_DIV = "ENABLED", parameter CLK1_DIV = "ENABLED", parameter CLK2_DIV = "ENABLED",
    parameter CLK3_DIV = "ENABLED", parameter HIGHSPEED_CLK = "NONE", parameter GSR = "ENABLED",
    parameter CAS_MATCH_REG = "FALSE", parameter SOURCEB_MODE = "B_SHIFT", parameter MULT_BYPASS = "DISABLED",
    parameter RESETMODE = "SYNC"
) (
    input wire A0,
    input wire A1,
    input wire A2,
    input wire A3,
    input wire A4,
    input wire A5,
    input wire A6,
    input wire A7,
    input wire A8,
    input wire A9,
    input wire A10,
    input wire A11,
    input wire A12,
    input wire A13,
    input wire A14,
    input wire A15,
    input wire A16,
    input wire A17,
    input wire B0,
    input wire B1,
    input wire B2,
    input wire B3,
    input wire B4,
    input wire B5,
    input wire B6,
    input wire B7,
    input wire B8,
    input wire B9,
    input wire B10,
    input wire B11,
    input wire B12,
    input wire B13,
    input wire B14,
    input wire B15,
    input wire B16,
    input wire B17,
    input wire C0,
    input wire C1,
    input wire C2,
    input wire C3,
    input wire C4,
    input wire C5,
    input wire C6,
    input wire C7,
    input wire C8,
    input wire C9,
    input wire C10,
    input wire C11,
    input wire C12,
    input wire C13,
    input wire C14,
    input wire C15,
    input wire C16,
    input wire C17,
    input wire SIGNEDA,
    input wire SIGNEDB,
    input wire SOURCEA,
    input wire SOURCEB,
    input wire CLK0,
    input wire CLK1,
    input wire CLK2,
    input wire CLK3,
    input wire CE0,
    input wire CE1,
    input wire CE2,
    input wire CE3,
    input wire RST0,
    input wire RST1,
    input wire RST2,
    input wire RST3,
    output wire P0,
    output wire P1,
    output wire P2,
    output wire P3,
    output wire P4,
    output wire P5,
    output wire P6,
    output wire P7,
    output wire P8,
    output wire P9,
    output wire P10,
    output wire P11,
    output wire P12,
    output wire P13,
    output wire P14,
    output wire P15,
    output wire P16,
    output wire P17,
    output wire P18,
    output wire P19,
    output wire P20,
    output wire P21,
    output wire P22,
    output wire P23,
    output wire P24,
    output wire P25,
    output wire P26,
    output wire P27,
    output wire P28,
    output wire P29,
    output wire P30,
    output wire P31,
    output wire P32,
    output wire P33,
    output wire P34,
    output wire P35
);
  wire [17:0] a = {A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0};
  wire [17:0] b = {B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0};
  // both operands of one signedness (the only use here): a signed product when both are signed
  wire signed [35:0] prod_s = $signed(a) * $signed(b);
  wire [35:0] prod_u = {18'd0, a} * {18'd0, b};
  wire [35:0] prod = SIGNEDA ? prod_s : prod_u;
  reg [35:0] p_q = 36'd0;
  always @(posedge CLK0) begin
    if (RST0) p_q <= 36'd0;
    else if (CE0) p_q <= prod;
  end
  wire [35:0] p_out = (REG_OUTPUT_CLK == "CLK0") ? p_q : prod;
  assign P0 = p_out[0];
  assign P1 = p_out[1];
  assign P2 = p_out[2];
  assign P3 = p_out[3];
  assign P4 = p_out[4];
  assign P5 = p_out[5];
  assign P6 = p_out[6];
  assign P7 = p_out[7];
  assign P8 = p_out[8];
  assign P9 = p_out[9];
  assign P10 = p_out[10];
  assign P11 = p_out[11];
  assign P12 = p_out[12];
  assign P13 = p_out[13];
  assign P14 = p_out[14];
  assign P15 = p_out[15];
  assign P16 = p_out[16];
  assign P17 = p_out[17];
  assign P18 = p_out[18];
  assign P19 = p_out[19];
  assign P20 = p_out[20];
  assign P21 = p_out[21];
  assign P22 = p_out[22];
  assign P23 = p_out[23];
  assign P24 = p_out[24];
  assign P25 = p_out[25];
  assign P26 = p_out[26];
  assign P27 = p_out[27];
  assign P28 = p_out[28];
  assign P29 = p_out[29];
  assign P30 = p_out[30];
  assign P31 = p_out[31];
  assign P32 = p_out[32];
  assign P33 = p_out[33];
  assign P34 = p_out[34];
  assign P35 = p_out[35];
  initial begin
    if (REG_INPUTA_CLK != "NONE" || REG_INPUTB_CLK != "NONE" || REG_INPUTC_CLK != "NONE"
        || REG_PIPELINE_CLK != "NONE" || (REG_OUTPUT_CLK != "NONE" && REG_OUTPUT_CLK != "CLK0")
        || (REG_OUTPUT_CLK == "CLK0" && (REG_OUTPUT_CE != "CE0" || REG_OUTPUT_RST != "RST0"
                                           || RESETMODE != "SYNC"))) begin
      $display("MULT18X18D model: unsupported register settings");
      $finish;
    end
  end
endmodule
/* verilator lint_on UNUSEDSIGNAL */
/* verilator lint_on UNUSEDPARAM */
